// Where a training step's time goes. Two views of the same wall time:
//  - the host thread's timeline, partitioned (the parts sum to wall_s): adapter (LoRA)
//    products, attention, other host ops (norms, RoPE, SwiGLU, loss, residuals, batch
//    bookkeeping), the optimizer, and waiting for the frozen engine;
//  - the frozen engine's busy time per product kind, measured from the engine-facing side
//    (a product is busy from when the engine could start it, its submission or the end of
//    the product before it, to its completion): forward, recompute (forward products run
//    again in backward), input gradient.
// Engine products run concurrently with host work, so the two views overlap: overlap_s()
// is the engine busy time during which the host computed instead of waiting.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace nl {

struct StepTiming {
  double wall_s = 0;
  double adapter_s = 0, attention_s = 0, other_s = 0, optimizer_s = 0, wait_s = 0;
  double frozen_forward_s = 0, frozen_recompute_s = 0, frozen_input_grad_s = 0;
  int64_t products = 0;  // frozen products submitted
  // Their operations (2 per weight and token): int8 products, and f32/f16 ones (the f16 mode
  // runs the f32 kernels). What a roofline compares with the machine's peaks.
  double frozen_ops_int8 = 0, frozen_ops_float = 0;

  double host_sum_s() const { return adapter_s + attention_s + other_s + optimizer_s + wait_s; }
  double frozen_s() const { return frozen_forward_s + frozen_recompute_s + frozen_input_grad_s; }
  // Engine busy time while the host was computing (the engine is busy whenever the host waits).
  double overlap_s() const { return std::max(0.0, frozen_s() - wait_s); }
  // Step time during which no frozen product ran.
  double outside_frozen_s() const { return std::max(0.0, wall_s - frozen_s()); }

  // Scales every figure (e.g. 1/n for the mean of n steps).
  StepTiming& operator*=(double f) {
    for (double* v : {&wall_s, &adapter_s, &attention_s, &other_s, &optimizer_s, &wait_s, &frozen_forward_s,
                      &frozen_recompute_s, &frozen_input_grad_s, &frozen_ops_int8, &frozen_ops_float})
      *v *= f;
    products = static_cast<int64_t>(static_cast<double>(products) * f + 0.5);
    return *this;
  }
  StepTiming& operator+=(const StepTiming& o) {
    wall_s += o.wall_s;
    adapter_s += o.adapter_s;
    attention_s += o.attention_s;
    other_s += o.other_s;
    optimizer_s += o.optimizer_s;
    wait_s += o.wait_s;
    frozen_forward_s += o.frozen_forward_s;
    frozen_recompute_s += o.frozen_recompute_s;
    frozen_input_grad_s += o.frozen_input_grad_s;
    products += o.products;
    frozen_ops_int8 += o.frozen_ops_int8;
    frozen_ops_float += o.frozen_ops_float;
    return *this;
  }
};

inline StepTiming operator-(StepTiming a, const StepTiming& b) {
  StepTiming neg = b;
  neg *= -1.0;
  neg.products = -b.products;
  return a += neg;
}

// Peak resident set size of this process so far, in bytes (getrusage; allocates nothing).
size_t peak_rss_bytes();
// CPU time of this process so far, every thread, user + system, in seconds (getrusage).
double process_cpu_seconds();

}  // namespace nl
