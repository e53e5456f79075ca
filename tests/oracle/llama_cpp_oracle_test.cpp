// llama.cpp as the oracle of the files we write (issue 38, item 8): real llama.cpp, the
// prebuilt CPU binary of the npm package node-llama-cpp 3.21.1 (tools/js/llama_greedy.mjs,
// never built or downloaded). On tiny models only:
//   - every GGUF we write loads in llama.cpp: `convert` (F32 and Q8_0), `quantize` (Q8_0,
//     Q4_0, Q4_K, Q6_K), `synth-model` (each architecture), `merge`;
//   - greedy tokens agree between ours and llama.cpp on F32 files, and on F32 copies of
//     quantized ones (dequantized by `quantize --type f32`: both engines then run the very
//     weights the quantized file holds, without either one's quantized kernels);
//   - an adapter `train` wrote gives the same greedy tokens in llama.cpp (its `lora` option)
//     as `generate --adapter` in ours, and the model `merge` folds it into gives them too.
// (merge_test.cpp checks merged models of random adapters against llama.cpp the same way.)
// llama.cpp runs once per test, on all of its files (LlamaCppRuns).
// Our side runs the exact path (--precision f32 --kv-type f32). Tests skip with a clear
// message where node or the package is missing.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <set>
#include <sstream>

#include "test_util.h"

namespace fs = std::filesystem;
using nltest::run_cli;
using nltest::shq;

namespace {

// Why llama.cpp cannot run here, or "" when it can.
std::string llama_cpp_missing() {
  if (nltest::node_with_oracles().empty()) return "node or tools/js/node_modules is missing (run scripts/setup.sh)";
  if (!fs::exists(nltest::source_dir() / "tools/js/node_modules/node-llama-cpp"))
    return "the npm package node-llama-cpp is not installed in tools/js (run scripts/setup.sh)";
  return "";
}
#define REQUIRE_LLAMA_CPP()                                                                                      \
  if (const std::string why = llama_cpp_missing(); !why.empty()) GTEST_SKIP() << "llama.cpp oracle unavailable: " << why;

const int kTokens = 30;

// Greedy runs of llama.cpp, gathered and then made by one process (llama.cpp starts once:
// tools/js/llama_greedy.mjs --jobs). Each add() returns the index of its result.
class LlamaCppRuns {
 public:
  explicit LlamaCppRuns(const fs::path& dir) : dir_(dir) {}
  size_t add(const fs::path& model, const std::string& ids, const fs::path& lora = {}) {
    nlohmann::json job = {{"model", model.string()}, {"ids", ids}, {"n", kTokens}};
    if (!lora.empty()) job["lora"] = {lora.string()};
    jobs_.push_back(job);
    return jobs_.size() - 1;
  }
  // The generated ids of every job, one string each (space-separated).
  std::vector<std::string> run() const {
    const fs::path file = dir_ / "llama_jobs.json";
    nltest::write_text(file, jobs_.dump());
    nltest::CmdResult r = nltest::run_cmd(
        "node " + shq((nltest::source_dir() / "tools/js/llama_greedy.mjs").string()) + " --jobs " + shq(file.string()));
    EXPECT_EQ(r.rc, 0) << "llama.cpp could not run the jobs " << jobs_.dump() << ":\n" << r.err;
    std::vector<std::string> out;
    std::istringstream in(r.out);
    for (std::string line; std::getline(in, line);) out.push_back(line);
    out.resize(jobs_.size());
    return out;
  }

 private:
  fs::path dir_;
  nlohmann::json jobs_ = nlohmann::json::array();
};

// Ours, on the exact path.
std::string ours_greedy(const fs::path& model, const std::string& ids, const fs::path& adapter = {}) {
  nltest::CmdResult r = run_cli("generate --model " + shq(model.string()) + " --prompt-ids " + shq(ids) +
                                " --temp 0 -n " + std::to_string(kTokens) +
                                " --print-ids --precision f32 --kv-type f32 --quiet" +
                                (adapter.empty() ? "" : " --adapter " + shq(adapter.string())));
  EXPECT_EQ(r.rc, 0) << r.err;
  return r.out.substr(0, r.out.find('\n'));
}

std::vector<std::string> words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> w;
  for (std::string x; in >> x;) w.push_back(x);
  return w;
}
size_t distinct(const std::string& s) {
  const std::vector<std::string> w = words(s);
  return std::set<std::string>(w.begin(), w.end()).size();
}

void run_ok(const std::string& args) {
  nltest::CmdResult r = run_cli(args);
  ASSERT_EQ(r.rc, 0) << args << "\n" << r.out << r.err;
}

// "Once upon a time" as ids (with BOS) by our tokenizer: both engines get the same ids.
std::string prompt_ids(const fs::path& model) {
  nltest::CmdResult r = run_cli("tokenize --bos --model " + shq(model.string()), "Once upon a time\n");
  EXPECT_EQ(r.rc, 0) << r.err;
  return r.out.substr(0, r.out.find('\n'));
}

TEST(LlamaCppOracle, ConvertedModelsLoadAndF32Agrees) {
  REQUIRE_LLAMA_CPP();
  NL_REQUIRE_SHARED("tinystories-656k", hf);
  nltest::TempDir td;
  run_ok("convert " + shq(hf.string()) + " " + shq((td / "f32.gguf").string()) + " --type f32");
  run_ok("convert " + shq(hf.string()) + " " + shq((td / "q8.gguf").string()) + " --type q8_0");
  const std::string ids = prompt_ids(td / "f32.gguf");
  const std::string ours = ours_greedy(td / "f32.gguf", ids);
  EXPECT_EQ(words(ours).size(), size_t(kTokens)) << ours;
  EXPECT_GE(distinct(ours), 5u) << "a real model's story, not one token repeated: " << ours;
  LlamaCppRuns llama(td.path);
  const size_t f32 = llama.add(td / "f32.gguf", ids), q8 = llama.add(td / "q8.gguf", ids);
  const std::vector<std::string> got = llama.run();
  EXPECT_EQ(got[f32], ours);
  EXPECT_EQ(words(got[q8]).size(), size_t(kTokens)) << "the Q8_0 file runs in llama.cpp";
}

TEST(LlamaCppOracle, QuantizedModelsLoadAndTheirF32CopiesAgree) {
  REQUIRE_LLAMA_CPP();
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", base);
  nltest::TempDir td;
  const std::string ids = prompt_ids(base);
  LlamaCppRuns llama(td.path);
  struct Case {
    std::string type, ours;
    size_t quantized, f32_copy;
  };
  std::vector<Case> cases;
  const size_t base_run = llama.add(base, ids);
  for (const char* type : {"q8_0", "q4_0", "q4_K", "q6_K"}) {
    const fs::path q = td / (std::string(type) + ".gguf"), f = td / (std::string(type) + "-f32.gguf");
    run_ok("quantize " + shq(base.string()) + " " + shq(q.string()) + " --type " + type);
    run_ok("quantize " + shq(q.string()) + " " + shq(f.string()) + " --type f32");
    cases.push_back({type, ours_greedy(f, ids), llama.add(q, ids), llama.add(f, ids)});
  }
  const std::vector<std::string> got = llama.run();
  EXPECT_EQ(got[base_run], ours_greedy(base, ids)) << "the shared F32 model itself";
  for (const Case& c : cases) {
    SCOPED_TRACE(c.type);
    EXPECT_EQ(words(got[c.quantized]).size(), size_t(kTokens)) << "the quantized file runs in llama.cpp";
    EXPECT_GE(distinct(c.ours), 5u) << c.ours;
    EXPECT_EQ(got[c.f32_copy], c.ours) << "the F32 copy of the " << c.type << " file";
  }
}

// A trained adapter: `generate --adapter` in ours, `lora` in llama.cpp, and the model
// `merge` folds it into (F32, and the base's own type), all give the same tokens.
void expect_trained_adapter_agrees(const fs::path& base, const std::string& ids, const fs::path& td,
                                   LlamaCppRuns& llama, const std::function<void(const std::vector<std::string>&)>& more) {
  const fs::path data = nltest::source_dir() / "data/stories/train.jsonl";
  run_ok("train --model " + shq(base.string()) + " --data " + shq(data.string()) + " --out " +
         shq((td / "run").string()) + " --iters 20 --lr 2e-2 --batch 2 --seq-len 64 --precision f32 -t 1 --quiet");
  const fs::path adapter = td / "run" / "adapter.gguf";
  const std::string with_adapter = ours_greedy(base, ids, adapter);
  EXPECT_NE(with_adapter, ours_greedy(base, ids)) << "the adapter should change the output, or this proves little";
  EXPECT_GE(distinct(with_adapter), 2u) << with_adapter;
  run_ok("merge --model " + shq(base.string()) + " --adapter " + shq(adapter.string()) + " --type f32 --out " +
         shq((td / "merged-f32.gguf").string()));
  run_ok("merge --model " + shq(base.string()) + " --adapter " + shq(adapter.string()) + " --type q8_0 --out " +
         shq((td / "merged-q8.gguf").string()));
  const size_t lora = llama.add(base, ids, adapter);
  const size_t merged = llama.add(td / "merged-f32.gguf", ids);
  const size_t merged_q8 = llama.add(td / "merged-q8.gguf", ids);
  const std::vector<std::string> got = llama.run();
  EXPECT_EQ(got[lora], with_adapter) << "llama.cpp base + lora vs ours base + --adapter";
  EXPECT_EQ(got[merged], with_adapter) << "llama.cpp on the merged F32 model";
  EXPECT_GT(words(got[merged_q8]).size(), 0u) << "the merged Q8_0 model runs in llama.cpp";
  more(got);
}

TEST(LlamaCppOracle, TrainedAdapterOnStoriesGivesTheSameTokens) {
  REQUIRE_LLAMA_CPP();
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", base);
  nltest::TempDir td;
  LlamaCppRuns llama(td.path);
  expect_trained_adapter_agrees(base, prompt_ids(base), td.path, llama, [](const std::vector<std::string>&) {});
}

// Each architecture's tiny synthetic preset, random F32 weights: the base agrees (with a tied
// output, qwen2/qwen3's random base mostly repeats the last token: the trained adapter below
// is the stronger check), Q8_0 loads, and a trained adapter agrees as above.
class LlamaCppSynth : public ::testing::TestWithParam<const char*> {};

TEST_P(LlamaCppSynth, BaseAndTrainedAdapterAgree) {
  REQUIRE_LLAMA_CPP();
  nltest::TempDir td;
  const std::string preset = GetParam();
  const fs::path f32 = td / "f32.gguf", q8 = td / "q8.gguf";
  run_ok("synth-model --preset " + preset + " --type f32 --seed 1 --tokenizer generated " + shq(f32.string()));
  run_ok("synth-model --preset " + preset + " --type q8_0 --seed 1 --tokenizer generated " + shq(q8.string()));
  const std::string ids = "5 17 93 41 200 7";
  const std::string ours = ours_greedy(f32, ids);
  EXPECT_EQ(words(ours).size(), size_t(kTokens)) << ours;
  LlamaCppRuns llama(td.path);
  const size_t base_run = llama.add(f32, ids), q8_run = llama.add(q8, ids);
  expect_trained_adapter_agrees(f32, ids, td.path, llama, [&](const std::vector<std::string>& got) {
    EXPECT_EQ(got[base_run], ours) << "the F32 base";
    EXPECT_EQ(words(got[q8_run]).size(), size_t(kTokens)) << "the Q8_0 file runs in llama.cpp";
  });
}

INSTANTIATE_TEST_SUITE_P(Presets, LlamaCppSynth, ::testing::Values("tiny-llama", "tiny-qwen2", "tiny-qwen3"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           std::string name = info.param;
                           name.erase(std::remove(name.begin(), name.end(), '-'), name.end());
                           return name;
                         });

}  // namespace
