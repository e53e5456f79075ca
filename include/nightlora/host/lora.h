// LoRA adapters: for each adapted projection W (out x in), trainable A (rank x in) and
// B (out x rank); the adapted product is y = x·Wᵀ + (alpha/rank)·(dropout(x)·Aᵀ)·Bᵀ.
// Initialised as PEFT does: A Kaiming-uniform (bound 1/sqrt(in)), B zero.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "nightlora/modelio/model.h"

namespace nl {

struct LoraConfig {
  int64_t rank = 8;
  float alpha = 16.0f;
  float dropout = 0.0f;
  std::array<bool, kNumProj> targets{true, true, true, true, true, true, true};
  uint64_t seed = 0;
  float scale() const { return alpha / static_cast<float>(rank); }
  // Parses "q,k,v,o,gate,up,down" (also accepts "all"); throws nl::Error for unknown names.
  static std::array<bool, kNumProj> parse_targets(const std::string& list);
  std::string targets_string() const;
};

struct LoraPair {
  bool enabled = false;
  int64_t in = 0, out = 0;
  std::vector<float> A;  // rank x in, row-major
  std::vector<float> B;  // out x rank, row-major
};

struct LoraAdapter {
  LoraConfig cfg;
  int64_t n_layer = 0;
  std::vector<LoraPair> pairs;  // n_layer * kNumProj, index layer * kNumProj + proj

  LoraPair& at(int64_t layer, Proj p) { return pairs[static_cast<size_t>(layer * kNumProj + static_cast<int>(p))]; }
  const LoraPair& at(int64_t layer, Proj p) const {
    return pairs[static_cast<size_t>(layer * kNumProj + static_cast<int>(p))];
  }

  // PEFT-style init from cfg.seed. Throws nl::Error when rank exceeds a dimension of a
  // targeted projection.
  static LoraAdapter init(const ModelConfig& m, const LoraConfig& cfg);
  // Same shapes, all zeros (for gradients and optimizer moments).
  LoraAdapter zeros_like() const;
  int64_t n_params() const;
  // Every value of A and B is finite (no NaN, no infinity).
  bool all_finite() const;
};

// (in, out) of a projection for this model.
std::pair<int64_t, int64_t> proj_shape(const ModelConfig& m, Proj p);

}  // namespace nl
