// MeZO: forward-only training of the same LoRA parameters (Malladi et al. 2023, "Fine-Tuning
// Language Models with Just Forward Passes"), the baseline that first-order training is
// compared with.
//
// One step: draw a direction z ~ N(0, I) over every trainable adapter element, evaluate the
// loss at θ + εz and at θ − εz (two forward passes, no backward), take the projected gradient
// g = (L+ − L−) / (2ε), an estimate of the directional derivative ∇L·z, and update with plain
// SGD: θ ← θ − lr·(g·z + wd·θ).
//
// z is never stored: each element is a counter-based normal draw from (seed, step, pair,
// matrix, index), regenerated wherever it is needed (both perturbations and the update). So the
// only "RNG state" is (seed, step), which a checkpoint already holds: a resumed MeZO run draws
// exactly the directions an uninterrupted one would. θ itself is never perturbed in place (the
// perturbed copies are written into a scratch adapter), so it is restored exactly, without the
// rounding of adding and subtracting εz.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "nightlora/data/batch.h"
#include "nightlora/host/lora.h"

namespace nl {

class TrainStep;

enum class TrainMethod { FirstOrder, Mezo };

// "first-order" or "mezo"; throws nl::Error naming the accepted values otherwise.
TrainMethod parse_train_method(const std::string& name);
const char* train_method_name(TrainMethod m);

// The key of step `step`'s direction for a run with data seed `seed`.
uint64_t mezo_step_key(uint64_t seed, int64_t step);

// Element `index` of matrix `matrix` (0: A, 1: B) of pair `pair` of the direction with key
// `key`: a standard normal draw (Box-Muller from one 64-bit hash).
float mezo_direction_element(uint64_t key, size_t pair, int matrix, size_t index);

// out = theta + scale·z(key), for every enabled pair (out must have theta's shapes; disabled
// pairs are left as they are).
void mezo_perturbed(const LoraAdapter& theta, uint64_t key, float scale, LoraAdapter& out);

// The whole direction z(key) as an adapter (for tests: compare with gradients).
LoraAdapter mezo_direction(const LoraAdapter& like, uint64_t key);

struct MezoEstimate {
  double loss_plus = 0;   // mean NLL over the step's supervised tokens at θ + εz
  double loss_minus = 0;  // ... at θ − εz
  double projected_grad = 0;  // (loss_plus − loss_minus) / (2ε)
  int64_t supervised = 0;
};

// Two forward passes over `micro` (the step's micro-batches, losses pooled over all their
// supervised tokens, as first-order training does) at θ ± εz(key). `scratch` must have θ's
// shapes; θ is not modified.
MezoEstimate mezo_estimate(TrainStep& step, const std::vector<Batch>& micro, const LoraAdapter& theta,
                           LoraAdapter& scratch, uint64_t key, double eps);

// The MeZO-SGD update: θ ← θ − lr·(g·z(key) + weight_decay·θ).
void mezo_update(LoraAdapter& theta, uint64_t key, double projected_grad, double lr, double weight_decay);

}  // namespace nl
