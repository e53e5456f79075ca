// The loss of a model (with or without a LoRA adapter) on each example of a data set: the
// nightly gate compares a candidate adapter with the current one example by example, so each
// example's loss is kept apart.
//
// It is the training step's forward pass (the same host ops and frozen engine products, in
// the same order) without anything training needs beyond it: several examples run in one
// forward (packed back to back, each attending only to itself, as training batches are), the
// loss is taken in chunks of supervised tokens through the output head (no [tokens x vocab]
// buffer), and no backward buffer, checkpoint or optimizer state exists. In f32 each
// example's loss sum is exactly the one the training step's forward_only gives for that
// example alone (tested), so packing changes the speed and nothing else. The tokens all
// examples start with (up to the first supervised position) run once per adapter: each
// example's own rows attend to their kept keys and values (the same bits again).
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "nightlora/data/dataset.h"
#include "nightlora/engine/frozen_engine.h"
#include "nightlora/host/lora.h"
#include "nightlora/modelio/model.h"

namespace nl {

struct ExampleLoss {
  double loss_sum = 0;       // next-token NLL summed over the example's supervised tokens
  int64_t n_supervised = 0;
  double mean() const { return n_supervised > 0 ? loss_sum / static_cast<double>(n_supervised) : 0.0; }
};

struct HeldoutLoss {
  std::vector<ExampleLoss> examples;  // in the data set's order
  double mean() const;                // over all supervised tokens (token-weighted)
  bool finite() const;                // every example's loss is a finite number
  // Leading tokens every scored example shares before its first supervised position, run
  // once for all of them (a task's instruction); 0 when there is none.
  int64_t shared_prefix = 0;
};

struct HeldoutOptions {
  int threads = 0;  // 0: all cores
  // The mode of every frozen product (projections and output head). F32 (the default, and
  // what the nightly gate uses) is the training step's validation arithmetic; Int8 runs the
  // engine's int8 products (faster on Q4_0/Q8_0 and on VNNI CPUs) and moves each loss by a
  // little (docs/ARCHITECTURE.md, "Evaluation speed").
  Precision precision = Precision::F32;
  // Examples are packed in data-set order into forwards of at most this many tokens (an
  // example longer than this runs alone; after a shared prefix, each example's own tokens). Sets the size of the buffers (on qwen2.5-0.5b
  // about 0.1 MiB per token, most of it the MLP's three d_ff-wide rows); beyond a few
  // hundred tokens a longer forward is no faster.
  int64_t max_batch_tokens = 512;
  int64_t loss_chunk = 64;  // supervised tokens per output-head product, as in training
};

// Holds one frozen engine and the forward buffers, so several adapters (the candidate and
// the current one of a night) are scored on one load of the weights.
class HeldoutScorer {
 public:
  HeldoutScorer(const Model& model, const HeldoutOptions& opt = {});
  // Borrows `engine`, made for `model` (a resident model's, C API): it must outlive the
  // scorer, and nobody else may submit to it while the scorer is made or score() runs (hold
  // the engine's turn). opt.threads is the host work's.
  HeldoutScorer(const Model& model, FrozenEngine& engine, const HeldoutOptions& opt = {});
  ~HeldoutScorer();
  HeldoutScorer(const HeldoutScorer&) = delete;
  HeldoutScorer& operator=(const HeldoutScorer&) = delete;

  // Supervised-token loss of the model + `adapter` (null: the base model) on every example
  // of `data`, without dropout. Throws nl::Error for an empty data set, a token outside the
  // vocabulary or an adapter made for another model.
  HeldoutLoss score(const LoraAdapter* adapter, const Dataset& data);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// One-shot form: a scorer for this call. threads: 0 = all cores.
HeldoutLoss heldout_loss(const Model& model, const LoraAdapter* adapter, const Dataset& data,
                         const HeldoutOptions& opt);
HeldoutLoss heldout_loss(const Model& model, const LoraAdapter* adapter, const Dataset& data, int threads = 0);

}  // namespace nl
