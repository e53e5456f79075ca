// The decoder on the frozen engine (nl::Decoder) against the reference decoder (the old
// row-by-row path, nl::ReferenceDecoder), on the tiny real models (stories260K GGUF,
// tinystories-656k Hugging Face folder; skipped with a message when ../shared is absent) and
// on tiny synthetic models of every architecture (llama, qwen2 with QKV bias, qwen3 with Q/K
// norm; Q4_0, Q8_0 and F16 weights), each with and without a LoRA adapter:
//  - f32 products and an f32 cache: the same greedy tokens, logits within f32 rounding;
//  - the default int8 products and f16 cache: logits within the distances documented in
//    docs/ARCHITECTURE.md (Inference), measured here and printed;
//  - prefill in chunks, one-token steps and a whole prompt at once give the same bits (the
//    engine's products do not depend on how tokens are grouped), so truncate() and prompt
//    caching are exact; a borrowed engine gives the owned one's bits; the cache is sized
//    from the context.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "decoder_test_models.h"
#include "infer_test_util.h"
#include "nightlora/engine/frozen_engine.h"
#include "nightlora/host/lora.h"
#include "nightlora/infer/decoder.h"
#include "nightlora/infer/reference_decoder.h"
#include "nightlora/modelio/model.h"
#include "nightlora/modelio/synth.h"
#include "nightlora/util/error.h"
#include "nightlora/tokenizer/tokenizer.h"

using namespace nltest;

namespace {

// Documented bounds of the fast modes against the exact path (docs/ARCHITECTURE.md,
// Inference), as the largest |logit difference| along the same tokens over the logits'
// own spread (max - min of the exact logits at that step). Measured (40 steps, with and
// without an adapter): int8 0.013-0.019 on the real models, 0.004-0.007 on the synthetic
// ones; an f16 cache 0.0003-0.0007 and 0.0001-0.0002. The bounds leave about 2x room.
constexpr double kInt8RelTol = 0.04;
constexpr double kF16KvRelTol = 0.0015;
// f32 engine against the reference decoder: the same products in another summation order.
constexpr double kF32AbsTol = 2e-3;

using ModelCase = decoder_test_models::NamedModel;

fs::path synth(const std::string& preset, nl::QType type) { return decoder_test_models::tiny_preset(preset, type, 3); }

std::vector<ModelCase> models() {
  std::vector<ModelCase> out;
  decoder_test_models::add_shared_model(out, "stories260K", "stories260K/stories260K.gguf", "decoder");
  decoder_test_models::add_shared_model(out, "tinystories-656k", "tinystories-656k", "decoder");
  out.push_back(decoder_test_models::tiny_model("tiny-llama", nl::QType::Q4_0, 3));
  out.push_back(decoder_test_models::tiny_model("tiny-qwen2", nl::QType::Q8_0, 3));
  out.push_back(decoder_test_models::tiny_model("tiny-qwen3", nl::QType::Q4_0, 3));
  out.push_back(decoder_test_models::tiny_model("tiny-qwen3", nl::QType::F16, 3));
  return out;
}

nl::LoraAdapter random_adapter(const nl::Model& m) { return decoder_test_models::filled_adapter(m, 9, 1); }

std::vector<int32_t> prompt_of(const nl::Model& m) {
  std::vector<int32_t> p;
  if (m.tokenizer && m.tokenizer->bos() >= 0) p.push_back(m.tokenizer->bos());
  for (int32_t i = 0; i < 6; ++i) p.push_back(static_cast<int32_t>((37 * i + 11) % std::min<int64_t>(m.config.vocab, 300)));
  return p;
}

int32_t argmax(const std::vector<float>& v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());  // first of ties
}

// Greedy decoding: the new ids, and the logits each was chosen from.
template <class D>
std::vector<int32_t> greedy(D& dec, const std::vector<int32_t>& prompt, int n, std::vector<std::vector<float>>* steps) {
  dec.reset();
  std::vector<int32_t> ids;
  std::vector<float> logits = dec.forward(prompt);
  for (int i = 0; i < n; ++i) {
    if (steps) steps->push_back(logits);
    ids.push_back(argmax(logits));
    if (i + 1 < n) logits = dec.forward(std::vector<int32_t>{ids.back()});
  }
  return ids;
}

// Logits along a given token sequence (teacher forcing): one per step.
std::vector<std::vector<float>> along(nl::Decoder& dec, const std::vector<int32_t>& prompt,
                                      const std::vector<int32_t>& ids) {
  dec.reset();
  std::vector<std::vector<float>> out = {dec.forward(prompt)};
  for (size_t i = 0; i + 1 < ids.size(); ++i) out.push_back(dec.forward(std::vector<int32_t>{ids[i]}));
  return out;
}

// Largest |a - b| over the steps, relative to the spread of b's logits at that step.
double rel_distance(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  double worst = 0;
  for (size_t s = 0; s < b.size(); ++s) {
    const auto [lo, hi] = std::minmax_element(b[s].begin(), b[s].end());
    worst = std::max(worst, max_abs_diff(a[s], b[s]) / std::max(1e-6, static_cast<double>(*hi - *lo)));
  }
  return worst;
}

constexpr int kSteps = 40;

TEST(EngineDecoder, F32GreedyTokensEqualTheReferenceDecoders) {
  for (const ModelCase& mc : models()) {
    const nl::LoraAdapter ad = random_adapter(*mc.model);
    for (const bool with_adapter : {false, true}) {
      const std::string what = mc.name + (with_adapter ? " + adapter" : "");
      nl::ReferenceDecoder ref(*mc.model, nl::DecoderOptions::exact(2));
      nl::Decoder dec(*mc.model, nl::DecoderOptions::exact(2));
      if (with_adapter) ref.set_adapter(&ad), dec.set_adapter(&ad);
      std::vector<std::vector<float>> ref_steps, dec_steps;
      const auto prompt = prompt_of(*mc.model);
      const auto want = greedy(ref, prompt, kSteps, &ref_steps);
      const auto got = greedy(dec, prompt, kSteps, &dec_steps);
      EXPECT_EQ(got, want) << what;
      double worst = 0;
      for (size_t s = 0; s < std::min(ref_steps.size(), dec_steps.size()) && got[s] == want[s]; ++s)
        worst = std::max(worst, max_abs_diff(dec_steps[s], ref_steps[s]));
      EXPECT_LE(worst, kF32AbsTol) << what;
      std::printf("[decoder] %-28s f32 engine vs reference: greedy %s, max |logit diff| %.2e\n", what.c_str(),
                  got == want ? "equal" : "DIFFERENT", worst);
    }
  }
}

TEST(EngineDecoder, Int8AndF16CacheStayWithinTheDocumentedDistance) {
  for (const ModelCase& mc : models()) {
    const nl::LoraAdapter ad = random_adapter(*mc.model);
    for (const bool with_adapter : {false, true}) {
      const std::string what = mc.name + (with_adapter ? " + adapter" : "");
      const auto prompt = prompt_of(*mc.model);
      nl::Decoder exact(*mc.model, nl::DecoderOptions::exact(2));
      if (with_adapter) exact.set_adapter(&ad);
      std::vector<std::vector<float>> exact_steps;
      const auto ids = greedy(exact, prompt, kSteps, &exact_steps);
      struct Mode {
        const char* name;
        nl::Precision p;
        nl::KvType kv;
        double tol;
      };
      for (const Mode& m : {Mode{"int8, kv f16 (default)", nl::Precision::Int8, nl::KvType::F16, kInt8RelTol},
                            Mode{"int8, kv f32", nl::Precision::Int8, nl::KvType::F32, kInt8RelTol},
                            Mode{"f32, kv f16", nl::Precision::F32, nl::KvType::F16, kF16KvRelTol}}) {
        nl::DecoderOptions o;
        o.threads = 2;
        o.precision = m.p;
        o.kv_type = m.kv;
        nl::Decoder dec(*mc.model, o);
        if (with_adapter) dec.set_adapter(&ad);
        const auto steps = along(dec, prompt, ids);
        const double dist = rel_distance(steps, exact_steps);
        double abs_diff = 0;
        for (size_t s = 0; s < steps.size(); ++s) abs_diff = std::max(abs_diff, max_abs_diff(steps[s], exact_steps[s]));
        const bool same_text = greedy(dec, prompt, kSteps, nullptr) == ids;
        EXPECT_LE(dist, m.tol) << what << ", " << m.name;
        EXPECT_GT(dist, 0.0) << what << ", " << m.name << ": the mode must change something";
        std::printf("[decoder] %-28s %-22s max |logit diff| %.4f (/ logit spread %.4f), greedy %d tokens %s\n",
                    what.c_str(), m.name, abs_diff, dist, kSteps, same_text ? "equal" : "different");
      }
    }
  }
}

// Every way of feeding the same tokens gives the same bits: the whole sequence at once,
// prefill chunks of 5, one token at a time; and so truncate() then a new continuation
// equals a fresh run of prompt + continuation (what tag scoring relies on).
TEST(EngineDecoder, ChunksStepsAndTruncateGiveTheSameBits) {
  for (const ModelCase& mc : models()) {
    const nl::LoraAdapter ad = random_adapter(*mc.model);
    for (const bool exact : {true, false}) {
      const std::string what = mc.name + (exact ? ", f32" : ", int8/f16") + " + adapter";
      nl::DecoderOptions o = exact ? nl::DecoderOptions::exact(2) : nl::DecoderOptions{};
      o.threads = 2;
      nl::Decoder whole(*mc.model, o);
      o.prefill_chunk = 5;
      nl::Decoder chunked(*mc.model, o);
      whole.set_adapter(&ad);
      chunked.set_adapter(&ad);
      std::vector<int32_t> ids = prompt_of(*mc.model);
      for (int32_t i = 0; i < 10; ++i) ids.push_back(static_cast<int32_t>((13 * i + 5) % std::min<int64_t>(mc.model->config.vocab, 200)));
      const std::vector<float> all = whole.forward(ids, /*all_logits=*/true);
      EXPECT_EQ(chunked.forward(ids, true), all) << what << ": chunked prefill";
      const size_t V = static_cast<size_t>(mc.model->config.vocab);
      chunked.reset();
      for (size_t t = 0; t < ids.size(); ++t) {
        const std::vector<float> one = chunked.forward(std::vector<int32_t>{ids[t]});
        ASSERT_TRUE(std::equal(one.begin(), one.end(), all.begin() + static_cast<long>(t * V)))
            << what << ": one token at a time, position " << t;
      }
      // Rewind to 8 positions and continue differently; then the same from scratch.
      chunked.truncate(8);
      const std::vector<int32_t> tail = {3, 1, 4, 1, 5};
      const std::vector<float> continued = chunked.forward(tail);
      std::vector<int32_t> fresh_ids(ids.begin(), ids.begin() + 8);
      fresh_ids.insert(fresh_ids.end(), tail.begin(), tail.end());
      whole.reset();
      EXPECT_EQ(whole.forward(fresh_ids), continued) << what << ": truncate";
      EXPECT_EQ(chunked.n_past(), 13);
      EXPECT_THROW(chunked.truncate(14), nl::Error);
      EXPECT_THROW(chunked.truncate(-1), nl::Error);
    }
  }
}

TEST(EngineDecoder, BorrowedEngineGivesTheOwnedEnginesBits) {
  auto m = nl::Model::load(synth("tiny-qwen2", nl::QType::Q4_0).string());
  nl::EngineOptions eo;
  eo.threads = 2;
  std::unique_ptr<nl::FrozenEngine> engine = nl::make_engine(*m, eo);
  nl::DecoderOptions o;
  o.threads = 2;
  nl::Decoder owned(*m, o), a(*m, *engine, o), b(*m, *engine, o);
  EXPECT_EQ(&a.engine(), engine.get());
  const auto ids = prompt_of(*m);
  const auto want = owned.forward(ids, true);
  EXPECT_EQ(a.forward(ids, true), want);
  // Two decoders on one engine, interleaved: each keeps its own cache.
  EXPECT_EQ(b.forward(std::span<const int32_t>(ids.data(), 3)),
            std::vector<float>(want.begin() + 2 * m->config.vocab, want.begin() + 3 * m->config.vocab));
  a.reset();
  a.forward(std::vector<int32_t>{7, 7});
  EXPECT_EQ(b.forward(std::span<const int32_t>(ids.data() + 3, ids.size() - 3)),
            std::vector<float>(want.end() - m->config.vocab, want.end()));

  // An engine made for another model is refused.
  auto other = nl::Model::load(synth("tiny-qwen3", nl::QType::Q4_0).string());
  EXPECT_THROW(nl::Decoder(*other, *engine, o), nl::Error);
}

TEST(EngineDecoder, KvCacheIsSizedFromTheContext) {
  auto m = nl::Model::load(synth("tiny-llama", nl::QType::Q8_0).string());
  const nl::ModelConfig& c = m->config;
  for (const nl::KvType kv : {nl::KvType::F16, nl::KvType::F32}) {
    nl::DecoderOptions o;
    o.threads = 1;
    o.max_context = 100;
    o.kv_type = kv;
    nl::Decoder d(*m, o);
    const size_t elem = kv == nl::KvType::F16 ? 2 : 4;
    EXPECT_EQ(d.kv_cache_bytes(), static_cast<size_t>(100 * c.kv_dim() * c.n_layer) * 2 * elem) << nl::kv_type_name(kv);
    EXPECT_EQ(d.max_context(), 100);
    std::vector<int32_t> ids(100, 5);
    d.forward(ids);
    EXPECT_THROW(d.forward(std::vector<int32_t>{5}), nl::Error);  // full
  }
  EXPECT_EQ(nl::parse_kv_type("f16"), nl::KvType::F16);
  EXPECT_EQ(nl::parse_kv_type("f32"), nl::KvType::F32);
  try {
    nl::parse_kv_type("q8");
    FAIL() << "expected an error";
  } catch (const nl::Error& e) {
    EXPECT_NE(std::string(e.what()).find("f16 or f32"), std::string::npos) << e.what();
  }
}

}  // namespace
