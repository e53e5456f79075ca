// One LoRA training step on the host: explicit forward and backward code for the decoder
// (llm.c style), with the frozen products delegated to the FrozenEngine, activations
// checkpointed at block inputs and recomputed block by block in backward, and the loss
// computed in token chunks over supervised positions only.
#pragma once
#include <cstdint>
#include <memory>

#include "nightlora/data/batch.h"
#include "nightlora/host/lora.h"
#include "nightlora/modelio/model.h"

namespace nl {

class FrozenEngine;
struct PrecisionPlan;

struct StepOptions {
  int threads = 0;           // 0: all cores
  int64_t loss_chunk = 64;   // supervised tokens per output-head chunk
  // The mode of each frozen product in training steps (forward_backward); null: all f32.
  // Validation (forward_only) always runs f32. Read at each step, so it must outlive the step.
  const PrecisionPlan* precision = nullptr;
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

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace nl
