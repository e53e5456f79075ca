// Rotary position embedding. Pair (a, b) of a head rotates by angle pos·inv_freq[i]:
//   a' = a·cos − b·sin,  b' = a·sin + b·cos
// Adjacent pairs are (2i, 2i+1) (llama GGUF layout); HalfSplit pairs are (i, i+hd/2).
// Backward applies the transposed rotation to the gradient.
#include <cmath>

#include "nightlora/util/error.h"
#include "ops.h"

namespace nl {

void RopeTable::build(const ModelConfig& cfg, int64_t max_positions) {
  head_dim = cfg.head_dim;
  style = cfg.rope_style;
  const int64_t half = head_dim / 2;
  inv_freq.assign(static_cast<size_t>(half), 0.0f);
  std::vector<double> f(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i)
    f[static_cast<size_t>(i)] = std::pow(static_cast<double>(cfg.rope_theta), -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
  if (!cfg.rope_freq_factors.empty()) {
    if (static_cast<int64_t>(cfg.rope_freq_factors.size()) != half)
      fail("rope_freqs", "expected " + std::to_string(half) + " frequency factors, found " +
                             std::to_string(cfg.rope_freq_factors.size()));
    for (int64_t i = 0; i < half; ++i) f[static_cast<size_t>(i)] /= cfg.rope_freq_factors[static_cast<size_t>(i)];
  } else if (cfg.rope_scaling.type == "llama3") {
    // Llama 3.1 frequency scaling as in Hugging Face's _compute_llama3_parameters.
    const RopeScaling& s = cfg.rope_scaling;
    const double low_wavelen = static_cast<double>(s.original_context) / s.low_freq_factor;
    const double high_wavelen = static_cast<double>(s.original_context) / s.high_freq_factor;
    for (double& fr : f) {
      const double wavelen = 2.0 * M_PI / fr;
      if (wavelen < high_wavelen) continue;
      if (wavelen > low_wavelen) {
        fr /= s.factor;
      } else {
        const double smooth = (static_cast<double>(s.original_context) / wavelen - s.low_freq_factor) /
                              (s.high_freq_factor - s.low_freq_factor);
        fr = (1.0 - smooth) * fr / s.factor + smooth * fr;
      }
    }
  }
  for (int64_t i = 0; i < half; ++i) inv_freq[static_cast<size_t>(i)] = static_cast<float>(f[static_cast<size_t>(i)]);
  max_pos = max_positions;
  cos.resize(static_cast<size_t>(max_pos * half));
  sin.resize(static_cast<size_t>(max_pos * half));
  for (int64_t p = 0; p < max_pos; ++p)
    for (int64_t i = 0; i < half; ++i) {
      const double a = static_cast<double>(p) * f[static_cast<size_t>(i)];
      cos[static_cast<size_t>(p * half + i)] = static_cast<float>(std::cos(a));
      sin[static_cast<size_t>(p * half + i)] = static_cast<float>(std::sin(a));
    }
}

namespace {

// sign = +1 rotates forward, -1 applies the transpose (backward).
void rope_apply(float* x, int64_t T, int64_t n_heads, const int32_t* pos, const RopeTable& rope, float sign,
                ThreadPool& pool) {
  const int64_t hd = rope.head_dim, half = hd / 2;
  const int64_t a_step = rope.style == RopeStyle::Adjacent ? 2 : 1;
  const int64_t b_off = rope.style == RopeStyle::Adjacent ? 1 : half;
  parallel_rows(pool, T, 32, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const float* c = rope.cos.data() + static_cast<int64_t>(pos[t]) * half;
      const float* s = rope.sin.data() + static_cast<int64_t>(pos[t]) * half;
      for (int64_t h = 0; h < n_heads; ++h) {
        float* xh = x + (t * n_heads + h) * hd;
        for (int64_t i = 0; i < half; ++i) {
          float& a = xh[i * a_step];
          float& b = xh[i * a_step + b_off];
          const float sn = sign * s[i];
          const float a0 = a, b0 = b;
          a = a0 * c[i] - b0 * sn;
          b = a0 * sn + b0 * c[i];
        }
      }
    }
  });
}

}  // namespace

void rope_forward(float* x, int64_t T, int64_t n_heads, const int32_t* pos, const RopeTable& rope, ThreadPool& pool) {
  rope_apply(x, T, n_heads, pos, rope, 1.0f, pool);
}

void rope_backward(float* dx, int64_t T, int64_t n_heads, const int32_t* pos, const RopeTable& rope, ThreadPool& pool) {
  rope_apply(dx, T, n_heads, pos, rope, -1.0f, pool);
}

}  // namespace nl
