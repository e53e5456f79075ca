// The decoder's own properties on stories260K: the KV cache gives the same logits as one
// pass over the whole sequence, results do not depend on the thread count, a LoRA adapter
// equals merging it into the weights, a tied head works, and bad input is a clear error.
#include <gtest/gtest.h>

#include <cstring>

#include "infer_test_util.h"
#include "nightlora/host/lora.h"
#include "nightlora/infer/decoder.h"
#include "nightlora/infer/generate.h"
#include "nightlora/modelio/model.h"
#include "nightlora/tokenizer/tokenizer.h"
#include "nightlora/util/error.h"

using namespace nltest;

namespace {

std::vector<int32_t> golden_ids(const fs::path& stories, size_t n) {
  auto ids = read_json(stories.parent_path() / "golden/bin_greedy_256.json")["ids"].get<std::vector<int32_t>>();
  ids.resize(n);
  return ids;
}

// Logits for every position, one token at a time through the cache.
std::vector<float> stepwise(nl::Decoder& d, const std::vector<int32_t>& ids) {
  std::vector<float> all;
  d.reset();
  for (int32_t id : ids) {
    const int32_t one[1] = {id};
    auto l = d.forward(one);
    all.insert(all.end(), l.begin(), l.end());
  }
  return all;
}

// A small deterministic pseudo-random fill (no dependence on <random> distributions).
std::vector<float> pattern(size_t n, uint32_t seed, float amp) {
  std::vector<float> v(n);
  uint32_t x = seed * 2654435761u + 1;
  for (auto& f : v) {
    x = x * 1664525u + 1013904223u;
    f = amp * (static_cast<float>(x >> 8) / 16777216.0f - 0.5f);
  }
  return v;
}

}  // namespace

TEST(Decoder, KvCacheMatchesOnePass) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", path);
  auto m = nl::Model::load(path.string());
  const auto ids = golden_ids(path, 24);
  nl::Decoder d(*m);
  const auto batch = d.forward(ids, /*all_logits=*/true);
  EXPECT_EQ(d.n_past(), 24);
  const auto steps = stepwise(d, ids);
  EXPECT_LE(max_abs_diff(batch, steps), 1e-5);

  // A prompt in two chunks (prefill then continuation) gives the same last logits.
  d.reset();
  d.forward(std::span<const int32_t>(ids.data(), 10));
  const auto tail = d.forward(std::span<const int32_t>(ids.data() + 10, 14));
  EXPECT_LE(max_abs_diff(tail, std::vector<float>(batch.end() - 512, batch.end())), 1e-5);
}

TEST(Decoder, ThreadCountDoesNotChangeResults) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", path);
  auto m = nl::Model::load(path.string());
  const auto ids = golden_ids(path, 16);
  nl::DecoderOptions one, three;
  one.threads = 1;
  three.threads = 3;
  nl::Decoder a(*m, one), b(*m, three);
  EXPECT_EQ(a.forward(ids, true), b.forward(ids, true));  // bit-identical
}

TEST(Decoder, TiedOutputHeadUsesTheEmbedding) {
  // stories260K's output.weight equals token_embd.weight, so dropping it must not change
  // anything: the loader then ties the head to the embedding.
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", path);
  TempDir tmp;
  copy_gguf(path, tmp / "tied.gguf", {}, {"output.weight"});
  auto tied = nl::Model::load((tmp / "tied.gguf").string());
  auto full = nl::Model::load(path.string());
  EXPECT_TRUE(tied->config.tied_output);
  EXPECT_FALSE(full->config.tied_output);
  EXPECT_EQ(tied->weights.output.data, tied->weights.tok_embd.data);
  const auto ids = golden_ids(path, 12);
  nl::Decoder a(*tied), b(*full);
  EXPECT_EQ(a.forward(ids, true), b.forward(ids, true));
}

TEST(Decoder, LoraAdapterEqualsMergedWeights) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", path);
  auto m = nl::Model::load(path.string());
  const int64_t rank = 2;
  nl::LoraAdapter ad;
  ad.cfg.rank = rank;
  ad.cfg.alpha = 4.0f;  // scale 2
  ad.n_layer = m->config.n_layer;
  ad.pairs.resize(static_cast<size_t>(ad.n_layer * nl::kNumProj));
  struct Target {
    int64_t layer;
    nl::Proj proj;
    std::string tensor;
  };
  const std::vector<Target> targets = {{1, nl::Proj::Q, "blk.1.attn_q.weight"},
                                       {3, nl::Proj::Down, "blk.3.ffn_down.weight"},
                                       {4, nl::Proj::V, "blk.4.attn_v.weight"}};
  uint32_t seed = 1;
  for (const Target& t : targets) {
    const nl::TensorView& w = m->weights.layers[t.layer].proj(t.proj);
    nl::LoraPair& p = ad.at(t.layer, t.proj);
    p.enabled = true;
    p.in = w.cols();
    p.out = w.rows();
    p.A = pattern(static_cast<size_t>(rank * p.in), seed++, 0.5f);
    p.B = pattern(static_cast<size_t>(p.out * rank), seed++, 0.5f);
  }

  // The merged model: W + scale·B·A written into a copy of the file (all tensors are F32).
  TempDir tmp;
  copy_gguf(path, tmp / "merged.gguf", [&](const nl::GgufTensorInfo& info) -> std::optional<TensorEdit> {
    for (const Target& t : targets) {
      if (info.name != t.tensor) continue;
      const nl::LoraPair& p = ad.at(t.layer, t.proj);
      std::vector<float> w(static_cast<size_t>(p.out * p.in));
      std::memcpy(w.data(), info.data, w.size() * 4);
      for (int64_t r = 0; r < p.out; ++r)
        for (int64_t c = 0; c < p.in; ++c) {
          float ba = 0;
          for (int64_t k = 0; k < rank; ++k) ba += p.B[r * rank + k] * p.A[k * p.in + c];
          w[r * p.in + c] += ad.cfg.scale() * ba;
        }
      TensorEdit e{nl::QType::F32, info.ne, std::vector<uint8_t>(w.size() * 4)};
      std::memcpy(e.bytes.data(), w.data(), e.bytes.size());
      return e;
    }
    return std::nullopt;
  });
  auto merged = nl::Model::load((tmp / "merged.gguf").string());

  const auto ids = golden_ids(path, 12);
  const nl::DecoderOptions exact = nl::DecoderOptions::exact();
  nl::Decoder with_adapter(*m, exact), plain(*m, exact), merged_dec(*merged, exact);
  with_adapter.set_adapter(&ad);
  const auto a = with_adapter.forward(ids, true);
  const auto b = merged_dec.forward(ids, true);
  const auto c = plain.forward(ids, true);
  EXPECT_LE(max_abs_diff(a, b), 1e-4);
  EXPECT_GT(max_abs_diff(a, c), 1e-2);  // the adapter really changes the output

  // With B = 0 (a freshly initialised adapter) nothing changes.
  for (auto& p : ad.pairs) std::fill(p.B.begin(), p.B.end(), 0.0f);
  with_adapter.reset();
  EXPECT_LE(max_abs_diff(with_adapter.forward(ids, true), c), 1e-6);
}

TEST(Decoder, RejectsAdapterThatDoesNotFit) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", path);
  auto m = nl::Model::load(path.string());
  nl::Decoder d(*m);
  nl::LoraAdapter ad;
  ad.cfg.rank = 2;
  ad.n_layer = 3;  // the model has 5
  ad.pairs.resize(3 * nl::kNumProj);
  EXPECT_THROW(d.set_adapter(&ad), nl::Error);

  ad.n_layer = m->config.n_layer;
  ad.pairs.assign(static_cast<size_t>(ad.n_layer * nl::kNumProj), {});
  nl::LoraPair& p = ad.at(0, nl::Proj::K);
  p.enabled = true;
  p.in = 64;
  p.out = 64;  // attn_k has 32 rows
  p.A.resize(2 * 64);
  p.B.resize(64 * 2);
  try {
    d.set_adapter(&ad);
    FAIL() << "expected an error";
  } catch (const nl::Error& e) {
    EXPECT_NE(std::string(e.what()).find("layer 0 projection k"), std::string::npos) << e.what();
  }
}

TEST(Decoder, BadTokensAndContextOverflowAreErrors) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", path);
  auto m = nl::Model::load(path.string());
  nl::DecoderOptions o;
  o.max_context = 8;
  nl::Decoder d(*m, o);
  EXPECT_THROW(d.forward(std::vector<int32_t>{1, 512}), nl::Error);
  EXPECT_THROW(d.forward(std::vector<int32_t>{-1}), nl::Error);
  EXPECT_THROW(d.forward(std::vector<int32_t>{}), nl::Error);
  d.forward(std::vector<int32_t>{1, 2, 3, 4, 5, 6});
  EXPECT_THROW(d.forward(std::vector<int32_t>{7, 8, 9}), nl::Error);
  EXPECT_NO_THROW(d.forward(std::vector<int32_t>{7, 8}));
}

TEST(Generate, StopsOnStopIdsAndLength) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", path);
  auto m = nl::Model::load(path.string());
  nl::Decoder d(*m, nl::DecoderOptions::exact());
  nl::SamplerOptions so;
  so.temperature = 0;
  nl::Sampler s(so);
  nl::GenerateOptions go;
  go.max_new_tokens = 5;
  auto r = nl::generate(d, s, {1}, go);
  EXPECT_EQ(r.ids, (std::vector<int32_t>{403, 407, 261, 378, 432}));
  EXPECT_FALSE(r.stopped_on_token);
  go.max_new_tokens = 50;
  go.stop_ids = {261};  // the third greedy token
  r = nl::generate(d, s, {1}, go);
  EXPECT_EQ(r.ids, (std::vector<int32_t>{403, 407}));
  EXPECT_TRUE(r.stopped_on_token);
  // With the ids from 403 up excluded, the greedy first token (403) cannot be chosen.
  go.stop_ids = {};
  go.max_new_tokens = 10;
  go.vocab_limit = 403;
  r = nl::generate(d, s, {1}, go);
  ASSERT_EQ(r.ids.size(), 10u);
  for (int32_t id : r.ids) EXPECT_LT(id, 403);
  // Stop ids of a SentencePiece model: EOS and BOS.
  const auto stops = nl::default_stop_ids(*m->tokenizer);
  EXPECT_NE(std::find(stops.begin(), stops.end(), 1), stops.end());
  EXPECT_NE(std::find(stops.begin(), stops.end(), 2), stops.end());
}

TEST(TextStream, StreamedTextEqualsTheWholeDecode) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", path);
  auto m = nl::Model::load(path.string());
  const auto& tok = *m->tokenizer;
  auto ids = golden_ids(path, 257);
  const std::vector<int32_t> gen(ids.begin() + 1, ids.end());
  nl::TextStream ts(tok, {1});
  std::string streamed;
  for (int32_t id : gen) streamed += ts.push(id);
  streamed += ts.finish();
  std::string golden = read_text(path.parent_path() / "golden/greedy_256.txt");
  golden.pop_back();  // the final newline is the CLI's
  EXPECT_EQ(streamed, golden);

  // A two-byte character from byte-fallback tokens appears only once it is complete.
  const int32_t c3 = tok.token_id("<0xC3>"), a9 = tok.token_id("<0xA9>");
  ASSERT_GE(c3, 0);
  ASSERT_GE(a9, 0);
  nl::TextStream t2(tok, {1});
  EXPECT_EQ(t2.push(c3), "");
  EXPECT_EQ(t2.push(a9), "\xC3\xA9");
  EXPECT_EQ(t2.finish(), "");
}
