// The done-criterion for stories260K (llama2.c's model, as llama.cpp's CI GGUF): greedy
// decoding from BOS for 256 tokens reproduces the golden text byte for byte, the same ids,
// and the position-0 logits within 1e-4.
#include <gtest/gtest.h>

#include "infer_test_util.h"
#include "nightlora/infer/decoder.h"
#include "nightlora/infer/generate.h"
#include "nightlora/modelio/model.h"
#include "nightlora/tokenizer/tokenizer.h"

using namespace nltest;

TEST(StoriesGolden, CliGreedy256MatchesGoldenText) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", model);
  const std::string golden = read_text(model.parent_path() / "golden/greedy_256.txt");
  CmdResult r = run_cli("generate --model " + shq(model.string()) + " --temp 0 -n 256 --precision f32 --kv-type f32");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out, golden);
}

TEST(StoriesGolden, GreedyIdsAndPosition0Logits) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", path);
  const auto golden = read_json(path.parent_path() / "golden/bin_greedy_256.json");
  auto model = nl::Model::load(path.string());
  ASSERT_EQ(model->config.rope_style, nl::RopeStyle::Adjacent);

  nl::Decoder dec(*model, nl::DecoderOptions::exact());
  nl::SamplerOptions so;
  so.temperature = 0;
  nl::Sampler greedy(so);
  std::vector<float> pos0;
  nl::GenerateOptions go;
  go.max_new_tokens = 256;
  go.stop_ids = nl::default_stop_ids(*model->tokenizer);
  const std::vector<int32_t> prompt = {model->tokenizer->bos()};
  ASSERT_EQ(prompt[0], 1);
  auto res = nl::generate(dec, greedy, prompt, go, [&](int32_t, std::span<const float> logits) {
    if (pos0.empty()) pos0.assign(logits.begin(), logits.end());
    return true;
  });

  std::vector<int32_t> expected_ids = golden["ids"].get<std::vector<int32_t>>();
  expected_ids.erase(expected_ids.begin());  // the BOS
  EXPECT_EQ(res.ids, expected_ids);

  ASSERT_EQ(pos0.size(), 512u);
  for (const auto& e : golden["pos0_top10_logits"]) {
    const int id = e[0].get<int>();
    EXPECT_NEAR(pos0[id], e[1].get<double>(), 1e-4) << "token " << id;
  }
}
