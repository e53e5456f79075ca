// The inference memory rule (inference_memory.h) against what is really allocated: the KV
// cache the decoder allocates, measured as heap bytes in use (glibc's mallinfo2), equals
// kv_cache_bytes for its positions, in f16 and f32, sized once from max_context or grown
// by a prompt; the line generate and chat print names those figures; serve's per-request
// budget is the cache plus one prompt chunk's activations.
#include <malloc.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "nightlora/infer/decoder.h"
#include "nightlora/infer/inference_memory.h"
#include "nightlora/modelio/model.h"
#include "nightlora/modelio/synth.h"
#include "nightlora/quant/qtype.h"
#include "nightlora/util/error.h"
#include "test_util.h"

namespace {

namespace fs = std::filesystem;

// Heap bytes in use (small chunks and mmapped ones).
size_t heap_in_use() {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 33)
  const struct mallinfo2 mi = mallinfo2();
  return mi.uordblks + mi.hblkhd;
#else
  return 0;
#endif
}

std::unique_ptr<nl::Model> tiny_qwen2(const nltest::TempDir& dir, nl::QType type = nl::QType::Q8_0) {
  const fs::path path = dir / ("tiny-qwen2-" + std::string(nl::qtype_name(type)) + ".gguf");
  nl::SynthOptions o;
  o.preset = "tiny-qwen2";
  o.type = type;
  o.seed = 3;
  o.tokenizer = "generated";
  nl::synth_model(path.string(), o);
  return nl::Model::load(path.string());
}

// Heap bytes a decoder holds after construction (and after `prompt` tokens, if any).
size_t decoder_heap_bytes(const nl::Model& m, nl::FrozenEngine& engine, int64_t max_context, nl::KvType kv,
                          int64_t prompt, size_t* kv_reported, int64_t* positions) {
  nl::DecoderOptions o;
  o.threads = 1;
  o.max_context = max_context;
  o.kv_type = kv;
  const size_t before = heap_in_use();
  nl::Decoder d(m, engine, o);
  if (prompt > 0) d.forward(std::vector<int32_t>(static_cast<size_t>(prompt), 5));
  const size_t held = heap_in_use() - before;
  *kv_reported = d.kv_cache_bytes();
  *positions = d.kv_cache_positions();
  return held;
}

TEST(InferenceMemory, KvCacheBytesAreWhatTheDecoderAllocates) {
  if (heap_in_use() == 0) GTEST_SKIP() << "no mallinfo2 here (not glibc >= 2.33): the heap cannot be measured";
  nltest::TempDir dir;
  auto m = tiny_qwen2(dir);
  const nl::ModelConfig& c = m->config;
  auto engine = nl::make_engine(*m, {"cpu", 1});
  for (const nl::KvType kv : {nl::KvType::F16, nl::KvType::F32}) {
    // Sized once from max_context: two decoders differ by the cache of the extra positions
    // (everything else a decoder holds at construction does not depend on the context).
    // (Long enough that the cache is far above the allocations' slack.)
    const int64_t long_ctx = std::min<int64_t>(c.context, 4096);
    // One vector per layer for K and one for V: each allocation carries a malloc header and
    // alignment, or, when large enough to be mmapped, rounds up to a page; and 1 KiB for
    // anything else the two decoders hold differently.
    const size_t per_vector = nl::kv_cache_bytes(c, long_ctx, kv) / static_cast<size_t>(2 * c.n_layer);
    const size_t slack = static_cast<size_t>(2 * c.n_layer) * (per_vector < (size_t{128} << 10) ? 256 : 4096) + 1024;
    ASSERT_GT(nl::kv_cache_bytes(c, long_ctx - 64, kv), 8 * slack) << "the test model's context is too short";
    size_t rep_a = 0, rep_b = 0;
    int64_t pos_a = 0, pos_b = 0;
    decoder_heap_bytes(*m, *engine, 64, kv, 0, &rep_a, &pos_a);  // first use: one-time allocations
    const size_t a = decoder_heap_bytes(*m, *engine, 64, kv, 0, &rep_a, &pos_a);
    const size_t b = decoder_heap_bytes(*m, *engine, long_ctx, kv, 0, &rep_b, &pos_b);
    EXPECT_EQ(pos_a, 64);
    EXPECT_EQ(pos_b, long_ctx);
    EXPECT_EQ(rep_a, nl::kv_cache_bytes(c, 64, kv));
    EXPECT_EQ(rep_b, nl::kv_cache_bytes(c, long_ctx, kv));
    const size_t want = nl::kv_cache_bytes(c, long_ctx - 64, kv);
    const size_t got = b - a;
    std::printf("[kv cache] %s: %lld positions: %zu bytes allocated, kv_cache_bytes %zu\n", nl::kv_type_name(kv),
                static_cast<long long>(long_ctx - 64), got, want);
    EXPECT_GE(got + slack, want) << nl::kv_type_name(kv);
    EXPECT_LE(got, want + slack) << nl::kv_type_name(kv);
    // The whole decoder holds at least its cache.
    EXPECT_GE(b, nl::kv_cache_bytes(c, long_ctx, kv));
  }
  // Grown by a prompt (no max_context): the reported positions are what was allocated.
  size_t rep = 0;
  int64_t pos = 0;
  decoder_heap_bytes(*m, *engine, 0, nl::KvType::F16, 40, &rep, &pos);
  EXPECT_GE(pos, 40);
  EXPECT_EQ(rep, nl::kv_cache_bytes(c, pos, nl::KvType::F16));
}

TEST(InferenceMemory, RuleAndPrintedLine) {
  nltest::TempDir dir;
  auto m = tiny_qwen2(dir);
  const nl::ModelConfig& c = m->config;
  // K and V, n_layer x kv_dim per position, 2 or 4 bytes.
  EXPECT_EQ(nl::kv_cache_bytes(c, 300, nl::KvType::F16), static_cast<size_t>(300 * c.n_layer * c.kv_dim() * 2 * 2));
  EXPECT_EQ(nl::kv_cache_bytes(c, 300, nl::KvType::F32), 2 * nl::kv_cache_bytes(c, 300, nl::KvType::F16));
  EXPECT_EQ(nl::kv_cache_bytes(c, 0, nl::KvType::F16), 0u);
  // A request: its cache (never past the model's context) and one chunk's activations.
  EXPECT_EQ(nl::inference_request_bytes(c, 300, nl::KvType::F16, 256),
            nl::kv_cache_bytes(c, std::min<int64_t>(300, c.context), nl::KvType::F16) +
                nl::decoder_activation_bytes(c, std::min<int64_t>(256, std::min<int64_t>(300, c.context))));
  EXPECT_EQ(nl::inference_request_bytes(c, c.context * 4, nl::KvType::F16),
            nl::inference_request_bytes(c, c.context, nl::KvType::F16));

  nl::DecoderOptions o;
  o.threads = 1;
  o.max_context = 64;
  nl::Decoder d(*m, o);
  const std::string line = nl::describe_inference_memory(d);
  EXPECT_NE(line.find("KV cache f16"), std::string::npos) << line;
  EXPECT_NE(line.find("for 64 positions (" + std::to_string(c.n_layer) + " layers x " + std::to_string(c.kv_dim())),
            std::string::npos)
      << line;
  EXPECT_NE(line.find("in the cpu engine (int8 products, 1 thread)"), std::string::npos) << line;
  o.max_context = 0;  // grows: the line says to what
  nl::Decoder g(*m, o);
  g.forward(std::vector<int32_t>(10, 5));
  const std::string grown = nl::describe_inference_memory(g);
  EXPECT_NE(grown.find("growing to"), std::string::npos) << grown;
}

// An int8 decoder on F16 weights holds the engine's Q8_0 copies of them from the start (made
// when the decoder is built: 34 bytes per row and 32 columns of each matrix the engine
// serves), so the model memory describe_inference_memory prints counts them; an f32 decoder
// holds none.
// An int8 decoder on F16 weights: its engine's Q8_0 copies are made while loading; on an
// engine of its own the F16 tiles are then freed (only the copies stay, and f32 products on
// them fail); on a shared engine (a caller's, which may run f32 products) both stay.
TEST(InferenceMemory, Int8DecoderOnF16WeightsHoldsTheEnginesCopiesFromTheStart) {
  nltest::TempDir dir;
  auto m = tiny_qwen2(dir, nl::QType::F16);
  size_t copies = 0;
  const auto add = [&](const nl::TensorView& w) { copies += static_cast<size_t>(w.rows() * ((w.cols() + 31) / 32) * 34); };
  add(m->weights.output.present() ? m->weights.output : m->weights.tok_embd);
  for (const nl::LayerWeights& l : m->weights.layers)
    for (int p = 0; p < nl::kNumProj; ++p) add(l.proj(static_cast<nl::Proj>(p)));
  nl::DecoderOptions o;
  o.threads = 1;
  o.precision = nl::Precision::F32;
  nl::Decoder f32(*m, o);
  const size_t f16_bytes = f32.engine().resident_weight_bytes();
  o.precision = nl::Precision::Int8;
  nl::Decoder int8(*m, o);
  EXPECT_EQ(int8.engine().resident_weight_bytes(), copies);
  EXPECT_LT(copies, f16_bytes * 55 / 100);  // 1.06 of 2 bytes per weight
  nl::FrozenEngine& e = int8.engine();
  const nl::WeightHandle q = e.handle(0, nl::Proj::Q);
  std::vector<float> x(static_cast<size_t>(e.cols(q)), 0.5f), y(static_cast<size_t>(e.rows(q)));
  EXPECT_THROW(e.forward(q, x.data(), 1, y.data(), nl::Precision::F32), nl::Error);
  e.forward(q, x.data(), 1, y.data(), nl::Precision::Int8);

  nl::Decoder shared(*m, f32.engine(), o);  // a caller's engine keeps its F16 tiles beside the copies
  EXPECT_EQ(f32.engine().resident_weight_bytes(), f16_bytes + copies);
  // The released engine's int8 products are the copies' as before: the same logits.
  const std::vector<int32_t> tokens = {1, 5, 9, 2, 7};
  EXPECT_EQ(int8.forward(tokens, true), shared.forward(tokens, true));
}

}  // namespace
