// Our inference against the independent PyTorch reference (tools/torch_ref/model.py, run with
// Debian's python3-torch). All reference runs are done by one Python process in
// SetUpTestSuite (torch is slow to start), for the jobs the selected tests need (ctest runs
// each test in its own process); each test then compares one model:
//  - tinystories-656k as a Hugging Face folder (half-split RoPE layout), greedy from BOS and
//    from a text prompt: the same tokens, and logits close at every step;
//  - the same model after `nightlora convert --type f32` (adjacent-pair layout): the same
//    tokens again, which proves both RoPE layouts;
//  - stories260K with rope_freqs factors and with llama3 scaling metadata, and as Q8_0/Q4_0;
//  - synthetic tiny qwen2 (QKV bias) and qwen3 (Q/K norm) models.
// Logits are compared along the reference's own token sequence (teacher forcing through our
// KV cache), so one near-tie cannot derail the comparison of all later steps.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "infer_test_util.h"
#include "nightlora/infer/decoder.h"
#include "nightlora/infer/generate.h"
#include "nightlora/modelio/model.h"
#include "nightlora/tokenizer/tokenizer.h"
#include "nightlora/util/half.h"

using namespace nltest;

namespace {

// f32 against f32 with a different summation order: differences are ~1e-6 relative; this
// bound is far below what a wrong RoPE pairing, norm or bias would cause (order 0.1..10).
constexpr double kLogitTol = 2e-4;

struct Job {
  std::string name;
  fs::path model;
  std::vector<int32_t> prompt;
  int n = 100;
  std::vector<int32_t> stop;  // empty: the model's BOS and EOS
};

struct Prepared {
  std::unique_ptr<TempDir> dir;
  std::string skip;                       // non-empty: why the suite cannot run
  std::map<std::string, std::string> failed_setup;  // job name -> why its model could not be made
  std::map<std::string, Job> jobs;
  std::map<std::string, nlohmann::json> ref;  // job name -> reference result
};

Prepared* g = nullptr;

// The reference jobs each test reads.
const std::map<std::string, std::vector<std::string>> kJobsOfTest = {
    {"TinyStoriesHfFromBos", {"hf_bos"}},
    {"TinyStoriesHfFromPrompt", {"hf_prompt"}},
    {"TinyStoriesConvertedGgufFromBos", {"gguf_bos"}},
    {"TinyStoriesConvertedGgufFromPrompt", {"gguf_prompt"}},
    {"HfAndConvertedGgufAgree", {"hf_bos", "hf_prompt", "gguf_bos", "gguf_prompt"}},
    {"RopeFreqFactors", {"stories_rope_freqs"}},
    {"Llama3RopeScaling", {"stories_llama3"}},
    {"RopeVariantsChangeTheGreedyText", {"stories_rope_freqs", "stories_llama3"}},
    {"StoriesQ8_0", {"stories_q8_0"}},
    {"StoriesQ4_0", {"stories_q4_0"}},
    {"SynthQwen2QkvBias", {"tiny-qwen2"}},
    {"SynthQwen3QkNorm", {"tiny-qwen3"}},
    {"SynthLlama", {"tiny-llama"}},
};

// Jobs needed by the tests of this suite that will run (after --gtest_filter).
std::set<std::string> needed_jobs() {
  std::set<std::string> need;
  const auto* ut = ::testing::UnitTest::GetInstance();
  for (int i = 0; i < ut->total_test_suite_count(); ++i) {
    const auto* suite = ut->GetTestSuite(i);
    if (std::string(suite->name()) != "TorchParity") continue;
    for (int k = 0; k < suite->total_test_count(); ++k) {
      const auto* t = suite->GetTestInfo(k);
      auto it = kJobsOfTest.find(t->name());
      if (t->should_run() && it != kJobsOfTest.end()) need.insert(it->second.begin(), it->second.end());
    }
  }
  return need;
}

std::string ids_str(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t i : ids) {
    if (!s.empty()) s += ' ';
    s += std::to_string(i);
  }
  return s;
}

// stories260K with extra RoPE metadata or tensors added.
void make_stories_variant(const fs::path& src, const fs::path& dst, const std::function<void(nl::GgufWriter&)>& extra) {
  copy_gguf(src, dst, {}, {}, extra);
}

}  // namespace

class TorchParity : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    g = new Prepared;
    g->dir = std::make_unique<TempDir>();
    const std::string py = python_with_torch();
    const fs::path models = shared_models_dir();
    if (py.empty()) {
      g->skip = "Debian's python3 with torch not found (/usr/bin/python3 + python3-torch)";
      return;
    }
    if (models.empty() || !fs::exists(models / "tinystories-656k") || !fs::exists(models / "stories260K")) {
      g->skip = "shared models not present (../shared/models/tinystories-656k, stories260K)";
      return;
    }
    const fs::path hf = models / "tinystories-656k";
    const fs::path stories = models / "stories260K/stories260K.gguf";
    const fs::path& tmp = g->dir->path;

    const std::set<std::string> need = needed_jobs();
    auto wanted = [&](const std::string& name) { return need.count(name) > 0; };
    std::vector<Job> jobs;
    // The text prompt is tokenized by our tokenizer; both sides then start from the same ids.
    std::vector<int32_t> story_prompt = {1, 147, 201, 282};  // fallback: "Once upon a time" ids
    try {
      auto m = nl::Model::load(hf.string());
      story_prompt = m->tokenizer->encode("Tom and Sue went to the park", true);
    } catch (const std::exception& e) {
      g->failed_setup["hf_prompt"] = std::string("loading the HF folder failed: ") + e.what();
    }
    if (wanted("hf_bos")) jobs.push_back({"hf_bos", hf, {1}, 100, {1, 2}});
    if (wanted("hf_prompt")) jobs.push_back({"hf_prompt", hf, story_prompt, 100, {1, 2}});

    const fs::path conv = tmp / "tinystories_f32.gguf";
    if (wanted("gguf_bos") || wanted("gguf_prompt")) {
      CmdResult c = run_cli("convert " + shq(hf.string()) + " " + shq(conv.string()) + " --type f32");
      if (c.rc == 0) {
        jobs.push_back({"gguf_bos", conv, {1}, 100, {1, 2}});
        jobs.push_back({"gguf_prompt", conv, story_prompt, 100, {1, 2}});
      } else {
        g->failed_setup["gguf_bos"] = g->failed_setup["gguf_prompt"] = "nightlora convert failed: " + c.err;
      }
    }

    const fs::path freqs = tmp / "stories_rope_freqs.gguf";
    if (wanted("stories_rope_freqs")) make_stories_variant(stories, freqs, [](nl::GgufWriter& w) {
      static const float f[4] = {1.0f, 2.0f, 4.0f, 8.0f};  // head_dim 8: four pairs
      w.add_tensor_data("rope_freqs.weight", nl::QType::F32, {4}, f);
    });
    if (wanted("stories_rope_freqs")) jobs.push_back({"stories_rope_freqs", freqs, {1}, 60, {1, 2}});

    const fs::path llama3 = tmp / "stories_llama3_scaling.gguf";
    if (wanted("stories_llama3")) make_stories_variant(stories, llama3, [](nl::GgufWriter& w) {
      // A short original context so the three frequency bands of the rule all occur in a
      // head_dim of 8 (wavelengths 6.3, 63, 628, 6283 against 16 and 64).
      w.set("llama.rope.scaling.type", nl::GgufValue::str("llama3"));
      w.set("llama.rope.scaling.factor", nl::GgufValue::f32(8.0f));
      w.set("llama.rope.scaling.low_freq_factor", nl::GgufValue::f32(1.0f));
      w.set("llama.rope.scaling.high_freq_factor", nl::GgufValue::f32(4.0f));
      w.set("llama.rope.scaling.original_context_length", nl::GgufValue::u32(64));
    });
    if (wanted("stories_llama3")) jobs.push_back({"stories_llama3", llama3, {1}, 60, {1, 2}});

    for (const char* type : {"q8_0", "q4_0"}) {
      if (!wanted(std::string("stories_") + type)) continue;
      const fs::path q = tmp / (std::string("stories_") + type + ".gguf");
      CmdResult r = run_cli("quantize " + shq(stories.string()) + " " + shq(q.string()) + " --type " + type + " -q");
      const std::string name = std::string("stories_") + type;
      if (r.rc == 0)
        jobs.push_back({name, q, {1}, 60, {1, 2}});
      else
        g->failed_setup[name] = "nightlora quantize failed: " + r.err;
    }

    for (const char* preset : {"tiny-qwen2", "tiny-qwen3", "tiny-llama"}) {
      if (!wanted(preset)) continue;
      const fs::path s = tmp / (std::string(preset) + ".gguf");
      CmdResult r = run_cli(std::string("synth-model --preset ") + preset + " --type f32 --seed 7 " + shq(s.string()));
      if (r.rc == 0)
        jobs.push_back({preset, s, {3, 17, 42, 5}, 24, {-1}});  // random weights: no stop token
      else
        g->failed_setup[preset] = "nightlora synth-model failed: " + r.err;
    }

    if (jobs.empty()) return;
    nlohmann::json spec = nlohmann::json::array();
    for (const Job& j : jobs) {
      spec.push_back({{"model", j.model.string()}, {"ids", j.prompt}, {"n", j.n}, {"stop", j.stop}});
      g->jobs[j.name] = j;
    }
    write_text(tmp / "jobs.json", spec.dump());
    CmdResult r = run_cmd(py + " " + shq((source_dir() / "tools/torch_ref/generate_ref.py").string()) + " --jobs " +
                          shq((tmp / "jobs.json").string()) + " --out " + shq((tmp / "ref.json").string()));
    if (r.rc != 0) {
      for (const Job& j : jobs) g->failed_setup[j.name] = "the PyTorch reference failed: " + r.err;
      return;
    }
    const auto ref = read_json(tmp / "ref.json");
    for (size_t i = 0; i < jobs.size(); ++i) g->ref[jobs[i].name] = ref["runs"][i];
  }

  static void TearDownTestSuite() {
    delete g;
    g = nullptr;
  }

  // Greedy generation with our decoder: the new ids.
  static std::vector<int32_t> our_greedy(const nl::Model& m, const Job& j) {
    nl::Decoder dec(m, nl::DecoderOptions::exact());  // f32: the exact path
    nl::SamplerOptions so;
    so.temperature = 0;
    nl::Sampler s(so);
    nl::GenerateOptions go;
    go.max_new_tokens = j.n;
    go.stop_ids = j.stop;
    return nl::generate(dec, s, j.prompt, go).ids;
  }

  // Compares one job: logits at every step along the reference's tokens, then (optionally)
  // our own greedy tokens.
  static void check(const std::string& name, bool compare_greedy_ids) {
    if (!g->skip.empty()) GTEST_SKIP() << g->skip;
    if (g->failed_setup.count(name) && !g->ref.count(name)) FAIL() << g->failed_setup[name];
    ASSERT_TRUE(g->ref.count(name)) << "no reference result for " << name;
    const Job& j = g->jobs[name];
    const nlohmann::json& ref = g->ref[name];
    const auto ref_ids = ref["ids"].get<std::vector<int32_t>>();
    ASSERT_FALSE(ref_ids.empty()) << name << ": the reference generated nothing";

    auto m = nl::Model::load(j.model.string());
    nl::Decoder dec(*m, nl::DecoderOptions::exact());
    std::vector<float> logits = dec.forward(j.prompt);
    const auto& steps = ref["step_logits"];
    ASSERT_EQ(steps.size(), ref_ids.size());
    double worst = 0;
    for (size_t s = 0; s < ref_ids.size(); ++s) {
      const auto expected = steps[s].get<std::vector<float>>();
      const double diff = max_abs_diff(logits, expected);
      worst = std::max(worst, diff);
      ASSERT_LE(diff, kLogitTol) << name << ": logits differ at step " << s;
      const int32_t next[1] = {ref_ids[s]};
      if (s + 1 < ref_ids.size()) logits = dec.forward(next);
    }
    RecordProperty("max_logit_diff", std::to_string(worst));
    if (compare_greedy_ids) {
      EXPECT_EQ(ids_str(our_greedy(*m, j)), ids_str(ref_ids)) << name;
    }
  }
};

TEST_F(TorchParity, TinyStoriesHfFromBos) { check("hf_bos", true); }
TEST_F(TorchParity, TinyStoriesHfFromPrompt) { check("hf_prompt", true); }
TEST_F(TorchParity, TinyStoriesConvertedGgufFromBos) { check("gguf_bos", true); }
TEST_F(TorchParity, TinyStoriesConvertedGgufFromPrompt) { check("gguf_prompt", true); }

// Both layouts give the same tokens: the HF folder (half-split) and its GGUF (adjacent).
TEST_F(TorchParity, HfAndConvertedGgufAgree) {
  if (!g->skip.empty()) GTEST_SKIP() << g->skip;
  for (const char* p : {"bos", "prompt"}) {
    const std::string h = std::string("hf_") + p, q = std::string("gguf_") + p;
    if (!g->ref.count(q)) FAIL() << g->failed_setup[q];
    ASSERT_TRUE(g->ref.count(h));
    auto hf = nl::Model::load(g->jobs[h].model.string());
    auto gg = nl::Model::load(g->jobs[q].model.string());
    EXPECT_EQ(hf->config.rope_style, nl::RopeStyle::HalfSplit);
    EXPECT_EQ(gg->config.rope_style, nl::RopeStyle::Adjacent);
    EXPECT_EQ(ids_str(our_greedy(*hf, g->jobs[h])), ids_str(our_greedy(*gg, g->jobs[q]))) << p;
  }
}

TEST_F(TorchParity, RopeFreqFactors) { check("stories_rope_freqs", true); }
TEST_F(TorchParity, Llama3RopeScaling) { check("stories_llama3", true); }
TEST_F(TorchParity, StoriesQ8_0) { check("stories_q8_0", true); }
TEST_F(TorchParity, StoriesQ4_0) { check("stories_q4_0", true); }
// Random-weight models: logits only (their near-uniform distributions make argmax ties
// between two correct implementations plausible).
TEST_F(TorchParity, SynthQwen2QkvBias) { check("tiny-qwen2", false); }
TEST_F(TorchParity, SynthQwen3QkNorm) { check("tiny-qwen3", false); }
TEST_F(TorchParity, SynthLlama) { check("tiny-llama", false); }

// The RoPE variants above must really change the model, or their parity would prove nothing.
TEST_F(TorchParity, RopeVariantsChangeTheGreedyText) {
  if (!g->skip.empty()) GTEST_SKIP() << g->skip;
  const fs::path golden = shared_models_dir() / "stories260K/golden/bin_greedy_256.json";
  auto plain = read_json(golden)["ids"].get<std::vector<int32_t>>();
  plain.erase(plain.begin());
  for (const char* name : {"stories_rope_freqs", "stories_llama3"}) {
    ASSERT_TRUE(g->ref.count(name)) << g->failed_setup[name];
    auto ids = g->ref[name]["ids"].get<std::vector<int32_t>>();
    std::vector<int32_t> prefix(plain.begin(), plain.begin() + static_cast<long>(std::min(ids.size(), plain.size())));
    EXPECT_NE(ids, prefix) << name;
  }
}
