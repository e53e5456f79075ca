// Memory rules of a training step: the engine's resident weight memory is the quantized
// size of the matrices it serves (plus small metadata) before and after training steps;
// the memory plan's arena is allocated when the step is made, no allocation during a step
// is as large as a [tokens x vocab] logits buffer, and a warm step allocates nothing sizable.
// (That the engine never allocates a dequantized matrix is tested in tests/engine.)
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>

#include <gtest/gtest.h>

#include "tiny_model.h"
#include "../engine/alloc_probe.h"
#include "nightlora/engine/frozen_engine.h"
#include "nightlora/host/memory_plan.h"
#include "nightlora/host/train_step.h"
#include "test_util.h"

namespace {

namespace fs = std::filesystem;

// Bytes of the matrices the engine serves: 7 projections per layer and the output head
// (which is the embedding matrix when tied).
size_t served_matrix_bytes(const nl::Model& m) {
  size_t n = m.weights.output.present() ? m.weights.output.nbytes : m.weights.tok_embd.nbytes;
  for (const auto& l : m.weights.layers)
    for (int p = 0; p < nl::kNumProj; ++p) n += l.proj(static_cast<nl::Proj>(p)).nbytes;
  return n;
}

// check_logits: only meaningful when the vocabulary is large next to the model width
// (otherwise the activation checkpoints are legitimately larger than T x vocab).
void check_resident_during_training(const nl::Model& model, int64_t T, int64_t rank, bool check_logits) {
  auto engine = nl::make_engine(model, {"cpu", 2});
  const size_t quantized = served_matrix_bytes(model);
  EXPECT_EQ(engine->resident_weight_bytes(), quantized);
  EXPECT_LE(engine->resident_weight_bytes(), model.weight_bytes());
  const size_t metadata = engine->resident_bytes() - engine->resident_weight_bytes();
  EXPECT_LT(metadata, 1024 + 256 * static_cast<size_t>(model.config.n_layer * nl::kNumProj + 1));

  nl::Batch batch = nltest::make_batch({T / 2, T / 4, T - T / 2 - T / 4}, model.config.vocab, 3, 5);
  nl::LoraConfig lc;
  lc.rank = rank;
  nl::LoraAdapter a = nl::LoraAdapter::init(model.config, lc);
  // The memory plan's arena is allocated once, when the step is made; what the steps below
  // allocate is everything else (there must be no [T x vocab] buffer among it).
  nl::MemoryRequest mr;
  mr.max_tokens = T;
  mr.rank = rank;
  mr.n_adapter_params = a.n_params();
  const nl::MemoryPlan plan = nl::plan_step_memory(model, mr);
  nl::StepOptions so;
  so.threads = 2;
  so.memory = &plan;
  nl::TrainStep step(model, *engine, so);
  EXPECT_EQ(step.arena_bytes(), plan.arena_bytes());
  nl::LoraAdapter g = a.zeros_like();
  size_t cold_peak = 0, peak = 0;
  double seconds = 0;
  {
    nltest::AllocProbe probe;  // the first step (the engine's per-thread panels)
    step.forward_backward(batch, a, g, 1.0f, 1);
    cold_peak = probe.peak();
  }
  // The smallest of three warm steps' largest allocations: an engine thread may still grow its
  // per-thread panel on its first task of a kind (scheduling decides which thread runs which
  // task; under load that can fall in the second step), but a step that allocates every time
  // allocates in all three.
  peak = SIZE_MAX;
  for (int s = 2; s <= 4; ++s) {
    nltest::AllocProbe probe;
    auto t0 = std::chrono::steady_clock::now();
    step.forward_backward(batch, a, g, 1.0f, s);
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    peak = std::min(peak, probe.peak());
  }
  EXPECT_EQ(engine->resident_weight_bytes(), quantized) << "the engine must not grow during training";
  const size_t logits_bytes = static_cast<size_t>(T * model.config.vocab) * sizeof(float);
  if (check_logits) {
    EXPECT_LT(cold_peak, logits_bytes) << "an allocation as large as [T x vocab] logits";
  }
  // Nothing sizable; zero allocations, with a single-threaded engine, is
  // StepRuntime.WarmStepsAllocateNothing.
  EXPECT_LT(peak, 64u * 1024) << "a warm step reuses the memory plan";
  std::printf("[step memory] %s T=%lld: resident %zu bytes (quantized %zu + %zu metadata); largest allocation in the "
              "first step %zu bytes, in a warm step %zu (T x vocab logits would be %zu); warm step %.3f s\n",
              model.config.name.c_str(), static_cast<long long>(T), engine->resident_bytes(), quantized, metadata,
              cold_peak, peak, logits_bytes, seconds);
}

TEST(StepMemory, TinyQuantizedModel) {
  nltest::TinyModel tm = nltest::make_tiny_model("qwen2", nl::QType::Q8_0, 2, /*tied=*/true);
  check_resident_during_training(*tm.model, 400, 4, false);
}

TEST(StepMemory, Stories260K) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", path);
  auto model = nl::Model::load(path.string());
  check_resident_during_training(*model, 640, 8, true);
}

}  // namespace
