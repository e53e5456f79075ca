// AdamW over LoRA adapters, with torch.optim.AdamW semantics (bias-corrected moments,
// decoupled weight decay applied as p *= 1 - lr*wd before the Adam update), and global-norm
// gradient clipping as torch.nn.utils.clip_grad_norm_ does it. Deterministic: plain loops
// in a fixed order.
#pragma once
#include <cstdint>
#include <functional>

#include "nightlora/host/lora.h"

namespace nl {

struct AdamWOptions {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
};

class AdamW {
 public:
  AdamW(const LoraAdapter& params, const AdamWOptions& opt);

  // One update of every enabled A and B in `params` from `grads` (same shapes) at rate lr.
  void step(LoraAdapter& params, const LoraAdapter& grads, double lr);

  int64_t steps_taken() const { return t_; }
  const AdamWOptions& options() const { return opt_; }
  // The moments, for checkpoints.
  const LoraAdapter& first_moment() const { return m_; }
  const LoraAdapter& second_moment() const { return v_; }
  void restore(const LoraAdapter& m, const LoraAdapter& v, int64_t steps_taken);
  // The same in place: `fill` overwrites m and v keeping their shapes (a resume decodes a
  // checkpoint straight into them, Trainer::resume_from: no second copy of the moments).
  void restore_in_place(const std::function<void(LoraAdapter& m, LoraAdapter& v)>& fill, int64_t steps_taken);

 private:
  AdamWOptions opt_;
  LoraAdapter m_, v_;
  int64_t t_ = 0;
};

// The L2 norm of all gradients together (accumulated in double).
double global_grad_norm(const LoraAdapter& grads);

// Scales grads so their global norm is at most max_norm (torch: coef = max_norm/(norm+1e-6),
// applied when < 1). Returns the norm before clipping. max_norm <= 0 disables clipping.
double clip_grad_norm(LoraAdapter& grads, double max_norm);

// grads *= s (e.g. to average accumulated micro-batches).
void scale_grads(LoraAdapter& grads, float s);

}  // namespace nl
