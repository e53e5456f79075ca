// The loss of a model (with or without a LoRA adapter) on each example of a data set: the
// nightly gate compares a candidate adapter with the current one example by example, so each
// example's loss is computed on its own (one example per batch) and kept apart.
#pragma once
#include <cstdint>
#include <vector>

#include "nightlora/data/dataset.h"
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
};

// Supervised-token loss of `model` + `adapter` (null: the base model) on every example of
// `data`, computed in f32 by the host training step's forward pass (no dropout, no
// gradients), one example per batch. threads: 0 = all cores.
HeldoutLoss heldout_loss(const Model& model, const LoraAdapter* adapter, const Dataset& data, int threads = 0);

}  // namespace nl
