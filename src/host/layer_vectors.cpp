#include "nightlora/host/layer_vectors.h"

#include <string>

#include "nightlora/quant/qtype.h"
#include "nightlora/util/error.h"

namespace nl {

namespace {

std::vector<float> load_vector(const TensorView& t, int64_t expect, const char* what) {
  if (!t.present()) fail(std::string("model tensor ") + what, "missing");
  int64_t n = 1;
  for (int64_t e : t.ne) n *= e;
  if (n != expect)
    fail(t.name, std::string(what) + " has " + std::to_string(n) + " elements, expected " + std::to_string(expect));
  std::vector<float> v(static_cast<size_t>(n));
  dequantize_row(t.type, t.data, v.data(), n);
  return v;
}

}  // namespace

ModelVectors load_model_vectors(const Model& m) {
  const ModelConfig& cfg = m.config;
  const int64_t d = cfg.d_model;
  ModelVectors out;
  for (int64_t l = 0; l < cfg.n_layer; ++l) {
    const LayerWeights& w = m.weights.layers[static_cast<size_t>(l)];
    LayerVectors v;
    v.attn_norm = load_vector(w.attn_norm, d, "attn_norm");
    v.ffn_norm = load_vector(w.ffn_norm, d, "ffn_norm");
    if (cfg.qkv_bias) {
      v.bq = load_vector(w.bq, cfg.q_dim(), "attn_q.bias");
      v.bk = load_vector(w.bk, cfg.kv_dim(), "attn_k.bias");
      v.bv = load_vector(w.bv, cfg.kv_dim(), "attn_v.bias");
    }
    if (cfg.qk_norm) {
      v.q_norm = load_vector(w.q_norm, cfg.head_dim, "attn_q_norm");
      v.k_norm = load_vector(w.k_norm, cfg.head_dim, "attn_k_norm");
    }
    out.layers.push_back(std::move(v));
  }
  out.output_norm = load_vector(m.weights.output_norm, d, "output_norm");
  return out;
}

}  // namespace nl
