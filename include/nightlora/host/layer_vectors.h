// The small frozen vectors of a model (norm weights, Q/K/V biases, Q/K norms), dequantized to
// f32 once: what the training step, the held-out scorer and the decoder read besides the
// engine's matrices.
#pragma once
#include <vector>

#include "nightlora/modelio/model.h"

namespace nl {

struct LayerVectors {
  std::vector<float> attn_norm, ffn_norm;
  std::vector<float> bq, bk, bv;     // empty unless the model has QKV biases (qwen2)
  std::vector<float> q_norm, k_norm;  // empty unless the model norms Q and K per head (qwen3)
};

struct ModelVectors {
  std::vector<LayerVectors> layers;
  std::vector<float> output_norm;
};

// Throws nl::Error naming the tensor when one the configuration needs is missing or has
// another element count.
ModelVectors load_model_vectors(const Model& model);

}  // namespace nl
