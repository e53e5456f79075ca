// `nightlora generate` end to end: greedy ids, seeds, prompts, an adapter file, bad input, the
// timing line and the precision / KV cache options.
#include <gtest/gtest.h>

#include <algorithm>

#include "infer_test_util.h"
#include "nightlora/host/adapter_io.h"
#include "nightlora/host/lora.h"
#include "nightlora/infer/decoder.h"
#include "nightlora/infer/generate.h"
#include "nightlora/modelio/model.h"
#include "nightlora/tokenizer/tokenizer.h"

using namespace nltest;

namespace {

// The exact path (f32 products, f32 cache): these tests compare with golden ids and text.
std::string stories_arg(const fs::path& p) { return "--model " + shq(p.string()) + " --precision f32 --kv-type f32 "; }

}  // namespace

TEST(CliGenerate, PrintIdsGivesTheGoldenGreedyIds) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", path);
  CmdResult r = run_cli("generate " + stories_arg(path) + "--temp 0 -n 40 --print-ids");
  ASSERT_EQ(r.rc, 0) << r.err;
  auto ids = read_json(path.parent_path() / "golden/bin_greedy_256.json")["ids"].get<std::vector<int32_t>>();
  std::string expected;
  for (size_t i = 1; i <= 40; ++i) expected += std::to_string(ids[i]) + (i == 40 ? "\n" : " ");
  EXPECT_EQ(r.out, expected);
}

TEST(CliGenerate, SeedMakesSamplingReproducible) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", path);
  const std::string base = "generate " + stories_arg(path) + "--temp 1 --top-k 0 --top-p 1 -n 60 ";
  CmdResult a = run_cli(base + "--seed 11"), b = run_cli(base + "--seed 11"), c = run_cli(base + "--seed 12");
  ASSERT_EQ(a.rc, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_NE(a.out, c.out);  // 60 tokens at temperature 1: equal texts would be a broken seed
}

TEST(CliGenerate, PromptIsNotEchoedAndContinuesTheText) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", path);
  CmdResult r = run_cli("generate " + stories_arg(path) + "--temp 0 -n 20 --prompt " + shq("Once upon a time"));
  ASSERT_EQ(r.rc, 0) << r.err;
  // The greedy story from BOS begins "Once upon a time, there was a little girl"; given the
  // first words as the prompt, the output must be the continuation alone.
  EXPECT_EQ(r.out.rfind(", there was a little girl", 0), 0u) << r.out;
}

TEST(CliGenerate, AdapterChangesTheOutputAsTheLibraryDoes) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", path);
  auto m = nl::Model::load(path.string());
  nl::LoraConfig lc;
  lc.rank = 4;
  lc.alpha = 8;
  lc.seed = 5;
  nl::LoraAdapter ad = nl::LoraAdapter::init(m->config, lc);
  // A fresh adapter has B = 0; give B values so that it matters.
  uint32_t x = 1;
  for (auto& p : ad.pairs)
    for (auto& b : p.B) {
      x = x * 1664525u + 1013904223u;
      b = 0.3f * (static_cast<float>(x >> 8) / 16777216.0f - 0.5f);
    }
  TempDir tmp;
  nl::save_adapter_peft(ad, *m, (tmp / "adapter").string());

  nl::LoraAdapter loaded = nl::load_adapter((tmp / "adapter").string(), *m);
  nl::Decoder dec(*m, nl::DecoderOptions::exact());
  dec.set_adapter(&loaded);
  nl::SamplerOptions so;
  so.temperature = 0;
  nl::Sampler s(so);
  nl::GenerateOptions go;
  go.max_new_tokens = 30;
  go.stop_ids = nl::default_stop_ids(*m->tokenizer);
  const auto ids = nl::generate(dec, s, {1}, go).ids;
  std::string expected;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) expected += ' ';
    expected += std::to_string(ids[i]);
  }

  CmdResult with = run_cli("generate " + stories_arg(path) + "--temp 0 -n 30 --print-ids --adapter " +
                           shq((tmp / "adapter").string()));
  CmdResult without = run_cli("generate " + stories_arg(path) + "--temp 0 -n 30 --print-ids");
  ASSERT_EQ(with.rc, 0) << with.err;
  EXPECT_EQ(with.out, expected + "\n");
  EXPECT_NE(with.out, without.out);
}

TEST(CliGenerate, BadInputIsAClearError) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", path);
  CmdResult r = run_cli("generate " + stories_arg(path) + "--prompt-ids " + shq("1 600"));
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("600 is outside the vocabulary"), std::string::npos) << r.err;
  r = run_cli("generate " + stories_arg(path) + "--prompt-ids " + shq("1 x"));
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("'x' is not a token id"), std::string::npos) << r.err;
  r = run_cli("generate --model /nonexistent/model.gguf");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("/nonexistent/model.gguf"), std::string::npos) << r.err;
  r = run_cli("generate " + stories_arg(path) + "--adapter /nonexistent/adapter");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("/nonexistent/adapter"), std::string::npos) << r.err;
}

TEST(CliGenerate, SummaryLinePrecisionAndKvType) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", path);
  const std::string model = "generate --model " + shq(path.string()) + " --temp 0 -n 12 --print-ids ";
  // The default (int8 products, f16 cache) prints its timings on stderr, the ids alone on stdout.
  CmdResult r = run_cli(model);
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.err.find("| prompt 1 tokens in"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("| decode 11 tokens in"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("int8, kv f16"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), ' '), 11) << r.out;
  r = run_cli(model + "--precision f32 --kv-type f32 --quiet");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.err, "");
  r = run_cli(model + "--precision f32 --kv-type f32");
  EXPECT_NE(r.err.find("f32, kv f32"), std::string::npos) << r.err;
  r = run_cli(model + "--precision f16");
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.err.find("--precision"), std::string::npos) << r.err;
  r = run_cli(model + "--kv-type q8_0");
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.err.find("--kv-type"), std::string::npos) << r.err;
}

TEST(CliGenerate, PromptFileAndStandardInputAreThePrompt) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", path);
  TempDir tmp;
  const std::string gen = "generate " + stories_arg(path) + "--temp 0 -n 20 ";
  CmdResult want = run_cli(gen + "--prompt " + shq("Once upon a time"));
  ASSERT_EQ(want.rc, 0) << want.err;
  write_text(tmp / "prompt.txt", "Once upon a time\n");  // the trailing newline an editor adds is dropped
  CmdResult file = run_cli(gen + "--prompt-file " + shq((tmp / "prompt.txt").string()));
  EXPECT_EQ(file.rc, 0) << file.err;
  EXPECT_EQ(file.out, want.out);
  CmdResult in = run_cli(gen + "-f -", "Once upon a time");
  EXPECT_EQ(in.rc, 0) << in.err;
  EXPECT_EQ(in.out, want.out);
  CmdResult both = run_cli(gen + "--prompt x --prompt-file " + shq((tmp / "prompt.txt").string()));
  EXPECT_EQ(both.rc, 1);
  EXPECT_NE(both.err.find("give one of --prompt, --prompt-file and --prompt-ids"), std::string::npos) << both.err;
  CmdResult missing = run_cli(gen + "--prompt-file " + shq((tmp / "none.txt").string()));
  EXPECT_EQ(missing.rc, 1);
  EXPECT_NE(missing.err.find("cannot read the prompt file"), std::string::npos) << missing.err;
}

TEST(CliGenerate, SamplingOptionsAndTheirLlamaCppDefaults) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", path);
  CmdResult help = run_cli("generate --help");
  ASSERT_EQ(help.rc, 0);
  for (const char* shown : {"--temp FLOAT:FLOAT in [0 - 100]=0.8", "--top-k INT:NONNEGATIVE=40",
                            "--top-p FLOAT:FLOAT in [0 - 1]=0.95", "--min-p FLOAT:FLOAT in [0 - 1]=0.05",
                            "--repeat-penalty FLOAT:FLOAT in [0 - 100]=1", "--repeat-last-n INT:INT in [-1 - 1073741824]=64"})
    EXPECT_NE(help.out.find(shown), std::string::npos) << shown << " not in\n" << help.out;

  const std::string gen = "generate " + stories_arg(path) + "-n 40 --prompt " + shq("Once upon a time") + " ";
  // Stop strings end the text before them.
  CmdResult stop = run_cli(gen + "--temp 0 --stop little --stop zebra");
  ASSERT_EQ(stop.rc, 0) << stop.err;
  EXPECT_EQ(stop.out, ", there was a \n");
  // A repetition penalty changes greedy text (the greedy story repeats itself); seeds fix
  // sampled text under every option.
  CmdResult plain = run_cli(gen + "--temp 0 --print-ids");
  CmdResult penal = run_cli(gen + "--temp 0 --print-ids --repeat-penalty 1.5 --repeat-last-n 32");
  ASSERT_EQ(penal.rc, 0) << penal.err;
  EXPECT_NE(plain.out, penal.out);
  const std::string sampled = gen + "--temp 1.2 --min-p 0.1 --repeat-penalty 1.2 --top-k 0 --top-p 1 --seed 4 ";
  CmdResult a = run_cli(sampled), b = run_cli(sampled);
  ASSERT_EQ(a.rc, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  CmdResult bad = run_cli(gen + "--repeat-last-n -2");
  EXPECT_NE(bad.rc, 0);
  CmdResult both = run_cli(gen + "--stop x --print-ids");
  EXPECT_EQ(both.rc, 1);
}

// Several adapters at their scales are the model with them merged (`nightlora merge`, f32):
// the same greedy ids and first logits.
TEST(CliGenerate, SeveralScaledAdaptersEqualTheMergedWeights) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", path);
  auto m = nl::Model::load(path.string());
  TempDir tmp;
  for (uint64_t seed : {5u, 9u}) {
    nl::LoraConfig lc;
    lc.rank = seed == 5 ? 4 : 2;
    lc.alpha = 8;
    lc.seed = seed;
    nl::LoraAdapter ad = nl::LoraAdapter::init(m->config, lc);
    uint32_t x = static_cast<uint32_t>(seed);
    for (auto& p : ad.pairs)
      for (auto& b : p.B) {
        x = x * 1664525u + 1013904223u;
        b = 0.3f * (static_cast<float>(x >> 8) / 16777216.0f - 0.5f);
      }
    nl::save_adapter_peft(ad, *m, (tmp / ("a" + std::to_string(seed))).string());
  }
  const std::string a5 = shq((tmp / "a5").string()), a9 = shq((tmp / "a9:0.5").string());
  CmdResult merged = run_cli("merge --model " + shq(path.string()) + " --adapter " + a5 + " --lora " + a9 + " --type f32 --out " +
                             shq((tmp / "merged.gguf").string()) + " -q");
  ASSERT_EQ(merged.rc, 0) << merged.err;
  const std::string opts = "--temp 0 -n 30 --print-ids --logits-json ";
  CmdResult adapted = run_cli("generate " + stories_arg(path) + opts + shq((tmp / "adapted.json").string()) +
                              " --adapter " + a5 + " --lora " + a9);
  CmdResult folded = run_cli("generate " + stories_arg(tmp / "merged.gguf") + opts + shq((tmp / "merged.json").string()));
  ASSERT_EQ(adapted.rc, 0) << adapted.err;
  ASSERT_EQ(folded.rc, 0) << folded.err;
  EXPECT_EQ(adapted.out, folded.out);
  const auto la = read_json(tmp / "adapted.json")["first_logits"].get<std::vector<float>>();
  const auto lm = read_json(tmp / "merged.json")["first_logits"].get<std::vector<float>>();
  EXPECT_LT(max_abs_diff(la, lm), 1e-4);
  // And the adapters matter: without the second one the ids differ.
  CmdResult one = run_cli("generate " + stories_arg(path) + "--temp 0 -n 30 --print-ids --adapter " + a5);
  EXPECT_NE(one.out, adapted.out);
}
