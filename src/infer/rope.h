// Rotary position embedding for one model: the per-pair frequencies (with llama.cpp's
// rope_freqs factors or Llama 3 frequency scaling) and the rotation in the model's pairing.
#pragma once
#include <cstdint>
#include <vector>

#include "nightlora/modelio/model.h"

namespace nl {

class Rope {
 public:
  explicit Rope(const ModelConfig& c);

  // cos/sin of every pair's angle at position `pos` (head_dim/2 values each).
  void angles(int64_t pos, float* cos_out, float* sin_out) const;

  // Rotates `n_heads` consecutive heads of head_dim values in place.
  void rotate(float* heads, int64_t n_heads, const float* cos, const float* sin) const;

  int64_t n_pairs() const { return static_cast<int64_t>(inv_freq_.size()); }
  const std::vector<double>& inv_freq() const { return inv_freq_; }

 private:
  int64_t head_dim_;
  RopeStyle style_;
  std::vector<double> inv_freq_;  // radians per position, per pair
};

}  // namespace nl
