// The training step against the independent PyTorch reference (tools/torch_ref/train_ref.py,
// float64 autograd over the same GGUF dequantized by its own numpy reader): the summed loss
// within 1e-5 relative and every adapter gradient tensor within ‖ours − ref‖/‖ref‖ ≤ 1e-4,
// on stories260K (F32 and re-quantized to Q8_0 and Q4_0) and on the synthetic tiny llama
// (llama3 RoPE scaling), qwen2 (QKV bias, tied head) and qwen3 (Q/K norm) models, all with
// grouped-query attention, several packed sequences and unsupervised positions; and after
// 20 AdamW steps every adapter tensor within 1e-4 the same way.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "nightlora/engine/frozen_engine.h"
#include "nightlora/host/optimizer.h"
#include "nightlora/host/train_step.h"
#include "nightlora/tokenizer/tokenizer.h"
#include "test_util.h"
#include "tiny_model.h"

namespace {

namespace fs = std::filesystem;
using nltest::shq;

struct RefResult {
  double loss_sum = 0;
  int64_t n_supervised = 0;
  std::vector<double> grads, final_params;
};

struct AdamWRun {
  int steps = 0;
  double lr = 1e-3, weight_decay = 0.0, max_grad_norm = 0.0;
};

// The enabled pairs in the order train_ref.py reads them.
std::vector<std::pair<int64_t, nl::Proj>> pair_order(const nl::LoraAdapter& a) {
  std::vector<std::pair<int64_t, nl::Proj>> v;
  for (int64_t l = 0; l < a.n_layer; ++l)
    for (int p = 0; p < nl::kNumProj; ++p)
      if (a.at(l, static_cast<nl::Proj>(p)).enabled) v.emplace_back(l, static_cast<nl::Proj>(p));
  return v;
}

std::vector<double> read_f64(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<double> v(bytes.size() / sizeof(double));
  std::memcpy(v.data(), bytes.data(), v.size() * sizeof(double));
  return v;
}

// Writes one comparison job for train_ref.py (batch.json + adapter.f32 in `dir`).
nlohmann::json write_job(const fs::path& model_path, const nl::Batch& b, const nl::LoraAdapter& a, float loss_scale,
                         const fs::path& dir, const AdamWRun& adam = {}) {
  fs::create_directories(dir);
  nlohmann::json j;
  j["tokens"] = b.tokens;
  j["labels"] = b.labels;
  j["seq_start"] = b.seq_start;
  j["rank"] = a.cfg.rank;
  j["alpha"] = a.cfg.alpha;
  j["loss_scale"] = loss_scale;
  j["pairs"] = nlohmann::json::array();
  std::ofstream af(dir / "adapter.f32", std::ios::binary);
  for (auto [l, p] : pair_order(a)) {
    j["pairs"].push_back({l, nl::proj_name(p)});
    const nl::LoraPair& pr = a.at(l, p);
    af.write(reinterpret_cast<const char*>(pr.A.data()), static_cast<std::streamsize>(pr.A.size() * sizeof(float)));
    af.write(reinterpret_cast<const char*>(pr.B.data()), static_cast<std::streamsize>(pr.B.size() * sizeof(float)));
  }
  af.close();
  nltest::write_text(dir / "batch.json", j.dump());
  nlohmann::json job = {{"model", model_path.string()},
                        {"batch", (dir / "batch.json").string()},
                        {"adapter", (dir / "adapter.f32").string()},
                        {"out", (dir / "ref").string()}};
  if (adam.steps > 0) {
    job["steps"] = adam.steps;
    job["lr"] = adam.lr;
    job["weight_decay"] = adam.weight_decay;
    job["max_grad_norm"] = adam.max_grad_norm;
  }
  return job;
}

// Reads a job's results; empty grads when the reference did not produce them.
RefResult read_reference(const fs::path& dir, bool with_final) {
  RefResult out;
  if (!fs::exists(dir / "ref/result.json")) return out;
  auto res = nlohmann::json::parse(nltest::read_text(dir / "ref/result.json"));
  out.loss_sum = res["loss_sum"].get<double>();
  out.n_supervised = res["n_supervised"].get<int64_t>();
  out.grads = read_f64(dir / "ref/grads.f64");
  if (with_final) out.final_params = read_f64(dir / "ref/final.f64");
  return out;
}

// ‖ours − ref‖/‖ref‖ for every tensor of `ours` against the flat reference, in pair order.
void expect_tensors_close(const nl::LoraAdapter& ours, const std::vector<double>& ref, double tol,
                          const std::string& what) {
  size_t off = 0;
  double worst = 0;
  for (auto [l, p] : pair_order(ours)) {
    const nl::LoraPair& pr = ours.at(l, p);
    for (int which = 0; which < 2; ++which) {
      const std::vector<float>& t = which == 0 ? pr.A : pr.B;
      ASSERT_LE(off + t.size(), ref.size()) << what << ": reference output too short";
      double num = 0, den = 0;
      for (size_t i = 0; i < t.size(); ++i) {
        const double d = t[i] - ref[off + i];
        num += d * d;
        den += ref[off + i] * ref[off + i];
      }
      off += t.size();
      const double rel = std::sqrt(num) / std::max(std::sqrt(den), 1e-30);
      worst = std::max(worst, rel);
      EXPECT_LE(rel, tol) << what << " layer " << l << " " << nl::proj_name(p) << (which == 0 ? ".A" : ".B")
                          << ": relative error " << rel << " (‖ref‖ = " << std::sqrt(den) << ")";
    }
  }
  EXPECT_EQ(off, ref.size()) << what;
  std::printf("[torch ref] %s: worst tensor relative error %.2e\n", what.c_str(), worst);
}

// Every comparison runs our step first and writes a job; then train_ref.py runs all jobs
// in one process (torch imports once), and each test compares its own results.
struct OursResult {
  std::string label;
  bool prepared = false;
  std::string why_not;  // when not prepared: the reason (skip or failure)
  bool skip = false;
  nl::StepResult step;
  nl::LoraAdapter grads;  // or, for the AdamW case, the final adapter
  double first_loss = 0, last_loss = 0;  // AdamW case: before the first and the last step
  fs::path dir;
};

class TorchRef : public ::testing::Test {
 public:
  static void SetUpTestSuite();
  static void TearDownTestSuite() {
    cases_.clear();
    tmp_.reset();
  }

 protected:
  static std::map<std::string, OursResult> cases_;
  static std::unique_ptr<nltest::TempDir> tmp_;
  static std::string python_error_;

  void check_step(const std::string& name) {
    ASSERT_TRUE(cases_.count(name)) << name;
    const OursResult& o = cases_[name];
    if (o.skip) GTEST_SKIP() << o.why_not;
    ASSERT_TRUE(o.prepared) << o.why_not;
    RefResult ref = read_reference(o.dir, false);
    ASSERT_FALSE(ref.grads.empty()) << "train_ref.py produced no result for " << name << ":\n" << python_error_;
    EXPECT_EQ(o.step.n_supervised, ref.n_supervised);
    const double loss_rel = std::fabs(o.step.loss_sum - ref.loss_sum) / std::fabs(ref.loss_sum);
    EXPECT_LE(loss_rel, 1e-5) << name << ": loss " << o.step.loss_sum << " vs reference " << ref.loss_sum;
    std::printf("[torch ref] %s: loss %.6f vs %.6f (relative %.1e)\n", name.c_str(), o.step.loss_sum, ref.loss_sum,
                loss_rel);
    expect_tensors_close(o.grads, ref.grads, 1e-4, name + " gradients");
  }
};

std::map<std::string, OursResult> TorchRef::cases_;
std::unique_ptr<nltest::TempDir> TorchRef::tmp_;
std::string TorchRef::python_error_;

OursResult run_ours(const std::string& label, const fs::path& model_path, int64_t rank, const fs::path& dir,
                    nlohmann::json& jobs) {
  OursResult o;
  o.label = label;
  o.dir = dir;
  auto model = nl::Model::load(model_path.string());
  auto engine = nl::make_engine(*model, {"cpu", 2});
  nl::TrainStep step(*model, *engine, {2, 16});
  nl::Batch batch = nltest::make_batch({37, 20, 29}, model->config.vocab, 4, 21);
  nl::LoraConfig lc;
  lc.rank = rank;
  lc.alpha = 2.0f * static_cast<float>(rank);
  lc.seed = 5;
  // Random B (not zero) so the A gradients are nonzero and checked too.
  nl::LoraAdapter adapter = nltest::random_adapter(model->config, lc, 8, 0.05f);
  o.grads = adapter.zeros_like();
  const float loss_scale = 1.0f / static_cast<float>(batch.n_supervised());
  o.step = step.forward_backward(batch, adapter, o.grads, loss_scale, 0);
  jobs.push_back(write_job(model_path, batch, adapter, loss_scale, dir));
  o.prepared = true;
  return o;
}

// 20 AdamW steps on one batch from the PEFT initialisation (B = 0), with weight decay and
// clipping: TrainStep + nl::AdamW against torch.optim.AdamW on autograd gradients.
OursResult run_ours_adamw(const fs::path& model_path, const fs::path& dir, nlohmann::json& jobs) {
  OursResult o;
  o.label = "stories260K after 20 AdamW steps";
  o.dir = dir;
  auto model = nl::Model::load(model_path.string());
  auto engine = nl::make_engine(*model, {"cpu", 2});
  nl::TrainStep step(*model, *engine, {2, 32});
  nl::Batch batch = nltest::make_batch({40, 33}, model->config.vocab, 3, 77);
  nl::LoraConfig lc;
  lc.rank = 4;
  lc.alpha = 8.0f;
  lc.seed = 9;
  nl::LoraAdapter adapter = nl::LoraAdapter::init(model->config, lc);
  const nl::LoraAdapter initial = adapter;
  AdamWRun run;
  run.steps = 20;
  run.lr = 2e-3;
  run.weight_decay = 0.01;
  run.max_grad_norm = 1.0;
  nl::AdamWOptions ao;
  ao.weight_decay = run.weight_decay;
  nl::AdamW opt(adapter, ao);
  const float loss_scale = 1.0f / static_cast<float>(batch.n_supervised());
  for (int s = 0; s < run.steps; ++s) {
    nl::LoraAdapter grads = adapter.zeros_like();
    nl::StepResult r = step.forward_backward(batch, adapter, grads, loss_scale, 0);
    if (s == 0) o.first_loss = r.loss_sum;
    o.last_loss = r.loss_sum;
    nl::clip_grad_norm(grads, run.max_grad_norm);
    opt.step(adapter, grads, run.lr);
  }
  o.grads = adapter;
  jobs.push_back(write_job(model_path, batch, initial, loss_scale, dir, run));
  o.prepared = true;
  return o;
}

void TorchRef::SetUpTestSuite() {
  tmp_ = std::make_unique<nltest::TempDir>();
  const std::string py = nltest::python_with_torch();
  const fs::path shared = nltest::shared_models_dir();
  const fs::path stories = shared.empty() ? fs::path() : shared / "stories260K/stories260K.gguf";
  nlohmann::json jobs = nlohmann::json::array();
  // Under ctest every test runs in its own process: prepare only the selected tests' cases.
  const std::map<std::string, std::string> test_of = {
      {"stories260K_f32", "Stories260K_F32"},
      {"stories260K_q8_0", "Stories260K_Q8_0"},
      {"stories260K_q4_0", "Stories260K_Q4_0"},
      {"tiny-llama_q8_0", "TinyLlama_Q8_0_GQA_Llama3Rope"},
      {"tiny-qwen2_f16", "TinyQwen2_F16_QkvBias_TiedHead"},
      {"tiny-qwen3_q4_0", "TinyQwen3_Q4_0_QkNorm"},
      {"adamw", "TwentyAdamWStepsMatch"}};
  auto selected = [&](const std::string& name) {
    const ::testing::TestSuite* suite = ::testing::UnitTest::GetInstance()->current_test_suite();
    if (!suite) return true;
    for (int i = 0; i < suite->total_test_count(); ++i)
      if (suite->GetTestInfo(i)->name() == test_of.at(name)) return suite->GetTestInfo(i)->should_run();
    return true;
  };
  auto prepare = [&](const std::string& name, const std::function<OursResult(const fs::path&)>& fn,
                     bool needs_stories) {
    if (!selected(name)) return;
    OursResult o;
    o.label = name;
    if (py.empty()) {
      o.skip = true;
      o.why_not = "Debian's python3 with torch (/usr/bin/python3) not found";
    } else if (needs_stories && (stories.empty() || !fs::exists(stories))) {
      o.skip = true;
      o.why_not = "shared model data not present: stories260K/stories260K.gguf (expected under ../shared/models)";
    } else {
      try {
        o = fn(tmp_->path / name);
      } catch (const std::exception& e) {
        o.why_not = name + ": " + e.what();
      }
    }
    cases_[name] = std::move(o);
  };
  auto make_file = [&](const std::string& args, const fs::path& out) {
    nltest::CmdResult r = nltest::run_cli(args);
    if (r.rc != 0 || !fs::exists(out)) throw std::runtime_error("nightlora " + args + " failed: " + r.err);
    return out;
  };
  for (std::string type : {"f32", "q8_0", "q4_0"})
    prepare("stories260K_" + type, [&](const fs::path& dir) {
      fs::create_directories(dir);
      fs::path path = stories;
      if (type != "f32")
        path = make_file("quantize " + shq(stories.string()) + " " + shq((dir / "m.gguf").string()) + " --type " +
                             type + " -q",
                         dir / "m.gguf");
      return run_ours("stories260K_" + type, path, 4, dir, jobs);
    }, true);
  for (auto [preset, type] : std::vector<std::pair<std::string, std::string>>{
           {"tiny-llama", "q8_0"}, {"tiny-qwen2", "f16"}, {"tiny-qwen3", "q4_0"}}) {
    const std::string name = preset + "_" + type;
    prepare(name, [&](const fs::path& dir) {
      fs::create_directories(dir);
      fs::path path = make_file("synth-model " + shq((dir / "m.gguf").string()) + " --preset " + preset + " --type " +
                                    type + " --seed 3 --tokenizer generated",
                                dir / "m.gguf");
      return run_ours(name, path, 8, dir, jobs);
    }, false);
  }
  prepare("adamw", [&](const fs::path& dir) {
    fs::create_directories(dir);
    return run_ours_adamw(stories, dir, jobs);
  }, true);
  if (jobs.empty()) return;
  nltest::write_text(tmp_->path / "jobs.json", jobs.dump());
  nltest::CmdResult r = nltest::run_cmd(shq(py) + " " +
                                        shq((nltest::source_dir() / "tools/torch_ref/train_ref.py").string()) +
                                        " --jobs " + shq((tmp_->path / "jobs.json").string()));
  if (r.rc != 0) python_error_ = r.err;
}

TEST_F(TorchRef, Stories260K_F32) { check_step("stories260K_f32"); }
TEST_F(TorchRef, Stories260K_Q8_0) { check_step("stories260K_q8_0"); }
TEST_F(TorchRef, Stories260K_Q4_0) { check_step("stories260K_q4_0"); }
TEST_F(TorchRef, TinyLlama_Q8_0_GQA_Llama3Rope) { check_step("tiny-llama_q8_0"); }
TEST_F(TorchRef, TinyQwen2_F16_QkvBias_TiedHead) { check_step("tiny-qwen2_f16"); }
TEST_F(TorchRef, TinyQwen3_Q4_0_QkNorm) { check_step("tiny-qwen3_q4_0"); }

TEST_F(TorchRef, TwentyAdamWStepsMatch) {
  const OursResult& o = cases_["adamw"];
  if (o.skip) GTEST_SKIP() << o.why_not;
  ASSERT_TRUE(o.prepared) << o.why_not;
  EXPECT_LT(o.last_loss, o.first_loss) << "20 steps on one batch must lower its loss";
  RefResult ref = read_reference(o.dir, true);
  ASSERT_FALSE(ref.final_params.empty()) << "train_ref.py produced no result:\n" << python_error_;
  expect_tensors_close(o.grads, ref.final_params, 1e-4, o.label);
}

}  // namespace
