// One LoRA training step on the host: explicit forward and backward code for the decoder
// (llm.c style), with the frozen products delegated to the FrozenEngine, activations
// checkpointed at block inputs and recomputed block by block in backward (except the blocks
// the memory plan keeps), and the loss computed in token chunks over supervised positions
// only. Every buffer lives in one arena allocated once; a step allocates nothing.
#pragma once
#include <cstdint>
#include <memory>

#include "nightlora/data/batch.h"
#include "nightlora/host/lora.h"
#include "nightlora/host/step_timing.h"
#include "nightlora/modelio/model.h"

namespace nl {

class FrozenEngine;
struct PrecisionPlan;
struct MemoryPlan;

struct StepOptions {
  int threads = 0;           // 0: all cores
  int64_t loss_chunk = 64;   // supervised tokens per output-head chunk
  // The mode of each frozen product in training steps (forward_backward); null: all f32.
  // Validation (forward_only) always runs f32. Read at each step, so it must outlive the step.
  const PrecisionPlan* precision = nullptr;
  // Core sharing with the engine (which has its own pool of `threads`): host work that runs
  // while an engine product is in flight (the LoRA branch: z = x·Aᵀ, the adapter gradients)
  // uses host_threads threads (1: the submitting thread alone, so the engine keeps its
  // cores); host work while the engine is idle (attention, norms, loss...) uses `threads`.
  int host_threads = 1;
  // The memory plan (plan_step_memory): the arena is allocated once at construction for
  // its shapes, and its kept blocks skip their recompute. Null: the step plans for the first
  // batch itself, keeping `keep_blocks` blocks. A batch larger than the plan re-plans (the
  // only allocation a step can make). Read at construction only.
  const MemoryPlan* memory = nullptr;
  int64_t keep_blocks = 1;
};

struct StepResult {
  double loss_sum = 0;       // sum of next-token NLL over supervised positions
  int64_t n_supervised = 0;
};

class TrainStep {
 public:
  TrainStep(const Model& model, FrozenEngine& engine, const StepOptions& opt);
  ~TrainStep();

  // Forward and backward over the batch. Adds loss_scale * d(loss_sum)/d(adapter) into
  // `grads` (same shapes as `adapter`; the caller zeroes it). LoRA dropout (adapter.cfg.dropout)
  // masks are drawn deterministically from dropout_seed.
  StepResult forward_backward(const Batch& batch, const LoraAdapter& adapter, LoraAdapter& grads, float loss_scale,
                              uint64_t dropout_seed);

  // Loss only (no dropout, no gradients): validation.
  StepResult forward_only(const Batch& batch, const LoraAdapter& adapter);

  // The breakdown of the last forward_backward / forward_only (the optimizer is the
  // caller's: optimizer_s is 0 here).
  const StepTiming& last_timing() const;
  // The sum over every call since construction (callers take differences, e.g. per optimizer
  // step over its micro-batches).
  const StepTiming& total_timing() const;
  // Bytes of the arena (every step buffer) and the blocks whose activations it keeps.
  size_t arena_bytes() const;
  int64_t kept_blocks() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace nl
