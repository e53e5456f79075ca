// `nightlora eval`: the loss it reports is the training loss of the same examples (the first
// step's loss, the validation rows of a run), adapters and their scales add up, and --json.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

#include "nightlora/eval/text_windows.h"
#include "nightlora/host/adapter_io.h"
#include "nightlora/host/lora.h"
#include "nightlora/modelio/model.h"
#include "nightlora/tokenizer/tokenizer.h"
#include "test_util.h"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using nltest::run_cli;
using nltest::shq;

double eval_loss(const std::string& args) {
  auto r = run_cli("eval --json --seq-len 128 --threads 2 " + args);
  EXPECT_EQ(r.rc, 0) << r.out << r.err;
  return json::parse(r.out)["loss"].get<double>();
}

void expect_close(double a, double b, const char* what) {
  EXPECT_LE(std::abs(a - b), 1e-5 * std::abs(b)) << what << ": " << a << " vs " << b;
}

TEST(EvalCli, EqualsTheTrainingLossOfTheSameExamples) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", model);
  const fs::path data = nltest::source_dir() / "data/stories";
  const std::string m = "--model " + shq(model.string());
  nltest::TempDir td;
  // One step over all 9 validation examples: its loss is the base model's on them.
  auto one = run_cli("train " + m + " --data " + shq((data / "valid.jsonl").string()) + " --out " +
                     shq((td / "one").string()) + " --iters 1 --batch 9 --seq-len 128 --threads 2 --precision f32");
  ASSERT_EQ(one.rc, 0) << one.err;
  const double step1 = nltest::read_jsonl(td / "one/log.jsonl", "train")[0]["loss"].get<double>();
  const double base = eval_loss(m + " --data " + shq((data / "valid.jsonl").string()));
  expect_close(base, step1, "base model vs the first step's loss");

  // A trained adapter: eval on the validation data gives the run's validation loss of the
  // adapter it kept.
  auto run = run_cli("train " + m + " --data " + shq((data / "train.jsonl").string()) + " --valid " +
                     shq((data / "valid.jsonl").string()) + " --out " + shq((td / "run").string()) +
                     " --iters 6 --batch 8 --lr 5e-3 --seq-len 128 --threads 2");
  ASSERT_EQ(run.rc, 0) << run.err;
  const json kept = json::parse(nltest::read_text(td / "run/run.json"))["kept_adapter"];
  const std::string valid = " --data " + shq((data / "valid.jsonl").string());
  const std::string adapter = (td / "run").string();
  const double adapted = eval_loss(m + valid + " --adapter " + shq(adapter));
  expect_close(adapted, kept["val_loss"].get<double>(), "adapter vs its validation loss in training");
  EXPECT_LT(adapted, base);

  // Scales: 0 is the base model; two halves are one whole; --lora is the same option.
  EXPECT_EQ(eval_loss(m + valid + " --adapter " + shq(adapter + ":0")), base);
  expect_close(eval_loss(m + valid + " --lora " + shq(adapter + ":0.5") + " --lora " + shq(adapter + ":0.5")), adapted,
               "two halves vs one whole");

  auto j = run_cli("eval --json --seq-len 128 " + m + valid);
  ASSERT_EQ(j.rc, 0);
  const json out = json::parse(j.out);
  EXPECT_EQ(out["examples"], 9);
  EXPECT_GT(out["supervised_tokens"].get<int64_t>(), 0);
  expect_close(out["perplexity"].get<double>(), std::exp(out["loss"].get<double>()), "perplexity");

  auto bad = run_cli("eval " + m + valid + " --adapter " + shq(adapter + ":abc"));
  EXPECT_EQ(bad.rc, 1);
  EXPECT_NE(bad.err.find("not a finite number"), std::string::npos) << bad.err;
}

}  // namespace

namespace {

// The valid split's stories as one raw text.
std::string stories_text() {
  std::string text;
  for (const json& row : nltest::read_jsonl(nltest::source_dir() / "data/stories/valid.jsonl"))
    text += (text.empty() ? "" : "\n\n") + row["text"].get<std::string>();
  return text;
}

}  // namespace

// `eval --text`: strided windows over raw text give the PyTorch reference's loss (Hugging
// Face's strided loop, written on its own in tools/torch_ref/eval_text_ref.py) on the same
// token ids, on a GGUF (stories260K) and a Hugging Face folder (tinystories-656k).
TEST(EvalCli, TextWindowsEqualThePyTorchReference) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", gguf);
  const std::string py = nltest::python_with_torch();
  if (py.empty()) GTEST_SKIP() << "Debian's python3 with torch not found (/usr/bin/python3 + python3-torch)";
  nltest::TempDir td;
  nltest::write_text(td / "stories.txt", stories_text());
  std::vector<fs::path> models = {gguf};
  if (fs::exists(nltest::shared_models_dir() / "tinystories-656k/config.json"))
    models.push_back(nltest::shared_models_dir() / "tinystories-656k");
  // Our runs, and the reference's jobs (one Python process: torch starts once).
  json jobs = json::array();
  std::vector<json> ours;
  std::vector<size_t> n_tokens;
  for (const fs::path& model : models) {
    const auto m = nl::Model::load(model.string());
    const std::vector<int32_t> ids = nl::load_text_tokens((td / "stories.txt").string(), *m->tokenizer);
    for (const auto& [seq_len, stride] : {std::pair{64, 24}, std::pair{96, 96}}) {
      auto r = run_cli("eval --json --threads 2 --model " + shq(model.string()) + " --text " +
                       shq((td / "stories.txt").string()) + " --seq-len " + std::to_string(seq_len) + " --stride " +
                       std::to_string(stride));
      ASSERT_EQ(r.rc, 0) << r.err;
      ours.push_back(json::parse(r.out));
      n_tokens.push_back(ids.size());
      jobs.push_back({{"model", model.string()}, {"ids", ids}, {"seq_len", seq_len}, {"stride", stride}});
    }
  }
  nltest::write_text(td / "jobs.json", jobs.dump());
  auto ref = nltest::run_cmd(py + " " + shq((nltest::source_dir() / "tools/torch_ref/eval_text_ref.py").string()) +
                             " --jobs " + shq((td / "jobs.json").string()));
  ASSERT_EQ(ref.rc, 0) << ref.err;
  const json runs = json::parse(ref.out)["runs"];
  ASSERT_EQ(runs.size(), ours.size());
  for (size_t i = 0; i < ours.size(); ++i) {
    SCOPED_TRACE(jobs[i]["model"].get<std::string>() + " seq-len " + jobs[i]["seq_len"].dump() + " stride " +
                 jobs[i]["stride"].dump());
    const json &o = ours[i], &r = runs[i];
    EXPECT_EQ(o["tokens"].get<size_t>(), n_tokens[i]);
    EXPECT_EQ(o["windows"], r["windows"]);
    EXPECT_EQ(o["scored_tokens"], r["scored_tokens"]);
    EXPECT_LE(std::abs(o["loss"].get<double>() - r["loss"].get<double>()), 1e-5 * r["loss"].get<double>())
        << o["loss"] << " vs " << r["loss"];
  }
}

TEST(EvalCli, TextNeedsOneSourceAndAReadableFile) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", model);
  const std::string m = "eval --model " + shq(model.string());
  auto none = run_cli(m);
  EXPECT_EQ(none.rc, 1);
  EXPECT_NE(none.err.find("give --data FILE.jsonl or --text FILE"), std::string::npos) << none.err;
  auto both = run_cli(m + " --text a.txt --data b.jsonl");
  EXPECT_NE(both.rc, 0);
  auto missing = run_cli(m + " --text /nonexistent/story.txt");
  EXPECT_EQ(missing.rc, 1);
  EXPECT_NE(missing.err.find("/nonexistent/story.txt: cannot read the text file"), std::string::npos) << missing.err;
  nltest::TempDir td;
  nltest::write_text(td / "story.txt", stories_text());
  auto stride = run_cli(m + " --text " + shq((td / "story.txt").string()) + " --seq-len 32 --stride 40");
  EXPECT_EQ(stride.rc, 1);
  EXPECT_NE(stride.err.find("--stride must be between 1 and --seq-len (32)"), std::string::npos) << stride.err;
  // The default stride is half the window.
  auto half = run_cli(m + " --json --threads 2 --text " + shq((td / "story.txt").string()) + " --seq-len 32");
  ASSERT_EQ(half.rc, 0) << half.err;
  EXPECT_EQ(json::parse(half.out)["stride"], 16);
}

// lamp2-eval with several adapters at their scales scores every tag as the model with them
// merged (`nightlora merge`, f32) does.
TEST(EvalCli, Lamp2EvalWithSeveralAdaptersEqualsTheMergedModel) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", model);
  nltest::TempDir td;
  const auto m = nl::Model::load(model.string());
  for (uint64_t seed : {3u, 8u}) {
    nl::LoraConfig lc;
    lc.rank = 2;
    lc.alpha = 4;
    lc.seed = seed;
    nl::LoraAdapter ad = nl::LoraAdapter::init(m->config, lc);
    uint32_t x = static_cast<uint32_t>(seed);
    for (auto& p : ad.pairs)
      for (auto& b : p.B) {  // a fresh adapter has B = 0: give it values so that it matters
        x = x * 1664525u + 1013904223u;
        b = 0.3f * (static_cast<float>(x >> 8) / 16777216.0f - 0.5f);
      }
    nl::save_adapter_peft(ad, *m, (td / ("a" + std::to_string(seed))).string());
  }
  const std::string adapters = " --adapter " + shq((td / "a3").string()) + " --lora " + shq((td / "a8:-0.7").string());
  auto merged = run_cli("merge --model " + shq(model.string()) + adapters + " --type f32 -q --out " +
                        shq((td / "merged.gguf").string()));
  ASSERT_EQ(merged.rc, 0) << merged.err;
  auto made = run_cli("make-lamp2 --users 1 --items-per-user 6 --questions-per-user 3 --seed 2 --out " + shq((td / "lamp").string()));
  ASSERT_EQ(made.rc, 0) << made.err;
  const std::string data = " --questions " + shq((td / "lamp/questions.json").string()) + " --outputs " +
                           shq((td / "lamp/outputs.json").string()) + " --threads 2 --json";
  auto with = run_cli("lamp2-eval --model " + shq(model.string()) + adapters + data);
  auto folded = run_cli("lamp2-eval --model " + shq((td / "merged.gguf").string()) + data);
  auto base = run_cli("lamp2-eval --model " + shq(model.string()) + data);
  ASSERT_EQ(with.rc, 0) << with.err;
  ASSERT_EQ(folded.rc, 0) << folded.err;
  const json w = json::parse(with.out)["items"], f = json::parse(folded.out)["items"], b = json::parse(base.out)["items"];
  ASSERT_EQ(w.size(), 3u);
  ASSERT_EQ(f.size(), 3u);
  double moved = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    const auto lw = w[i]["tag_logprob"].get<std::vector<double>>(), lf = f[i]["tag_logprob"].get<std::vector<double>>();
    const auto lb = b[i]["tag_logprob"].get<std::vector<double>>();
    ASSERT_EQ(lw.size(), lf.size());
    for (size_t k = 0; k < lw.size(); ++k) {
      EXPECT_NEAR(lw[k], lf[k], 1e-4) << "item " << i << " tag " << k;
      moved = std::max(moved, std::abs(lw[k] - lb[k]));
    }
  }
  EXPECT_GT(moved, 1e-2) << "the adapters do not change the scores: the comparison proves nothing";
}
