#include "rope.h"

#include <cmath>
#include <numbers>

namespace nl {

Rope::Rope(const ModelConfig& c) : head_dim_(c.head_dim), style_(c.rope_style) {
  const int64_t half = head_dim_ / 2;
  inv_freq_.resize(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i)
    inv_freq_[i] = std::pow(static_cast<double>(c.rope_theta), -2.0 * static_cast<double>(i) / static_cast<double>(head_dim_));

  if (!c.rope_freq_factors.empty()) {
    // llama.cpp stores Llama 3 scaling as divisors of each frequency (rope_freqs.weight).
    for (int64_t i = 0; i < half && i < static_cast<int64_t>(c.rope_freq_factors.size()); ++i)
      inv_freq_[i] /= static_cast<double>(c.rope_freq_factors[i]);
  } else if (c.rope_scaling.type == "llama3") {
    // Hugging Face's llama3 rule: long wavelengths slowed by `factor`, short ones kept, and
    // a smooth blend in between.
    const RopeScaling& s = c.rope_scaling;
    const double old_ctx = static_cast<double>(s.original_context);
    const double low_wavelen = old_ctx / s.low_freq_factor, high_wavelen = old_ctx / s.high_freq_factor;
    for (double& f : inv_freq_) {
      const double wavelen = 2 * std::numbers::pi / f;
      if (wavelen < high_wavelen) continue;
      if (wavelen > low_wavelen) {
        f /= s.factor;
      } else {
        const double smooth = (old_ctx / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
        f = (1 - smooth) * f / s.factor + smooth * f;
      }
    }
  }
}

void Rope::angles(int64_t pos, float* cos_out, float* sin_out) const {
  for (size_t i = 0; i < inv_freq_.size(); ++i) {
    const double a = static_cast<double>(pos) * inv_freq_[i];
    cos_out[i] = static_cast<float>(std::cos(a));
    sin_out[i] = static_cast<float>(std::sin(a));
  }
}

void Rope::rotate(float* heads, int64_t n_heads, const float* cos, const float* sin) const {
  const int64_t half = head_dim_ / 2;
  for (int64_t h = 0; h < n_heads; ++h) {
    float* x = heads + h * head_dim_;
    for (int64_t i = 0; i < half; ++i) {
      // Adjacent pairs (2i, 2i+1) in Meta's layout; (i, i + half) in the NeoX/HF layout.
      float& a = style_ == RopeStyle::Adjacent ? x[2 * i] : x[i];
      float& b = style_ == RopeStyle::Adjacent ? x[2 * i + 1] : x[i + half];
      const float a0 = a, b0 = b;
      a = a0 * cos[i] - b0 * sin[i];
      b = a0 * sin[i] + b0 * cos[i];
    }
  }
}

}  // namespace nl
