#include "nightlora/modelio/gguf_names.h"

#include "nightlora/modelio/gguf.h"
#include "nightlora/util/error.h"

namespace nl {

std::string gguf_arch_key(Arch a, const char* suffix) { return std::string(arch_name(a)) + "." + suffix; }

bool parse_arch_name(const std::string& name, Arch& out) {
  for (Arch a : {Arch::Llama, Arch::Qwen2, Arch::Qwen3})
    if (name == arch_name(a)) {
      out = a;
      return true;
    }
  return false;
}

const std::vector<LayerTensorName>& layer_tensor_names() {
  using K = LayerTensorKind;
  static const std::vector<LayerTensorName> names = {
      {"attn_norm.weight", "input_layernorm.weight", &LayerWeights::attn_norm, K::Always},
      {"attn_q.weight", "self_attn.q_proj.weight", &LayerWeights::wq, K::Always},
      {"attn_q.bias", "self_attn.q_proj.bias", &LayerWeights::bq, K::QkvBias},
      {"attn_k.weight", "self_attn.k_proj.weight", &LayerWeights::wk, K::Always},
      {"attn_k.bias", "self_attn.k_proj.bias", &LayerWeights::bk, K::QkvBias},
      {"attn_v.weight", "self_attn.v_proj.weight", &LayerWeights::wv, K::Always},
      {"attn_v.bias", "self_attn.v_proj.bias", &LayerWeights::bv, K::QkvBias},
      {"attn_q_norm.weight", "self_attn.q_norm.weight", &LayerWeights::q_norm, K::QkNorm},
      {"attn_k_norm.weight", "self_attn.k_norm.weight", &LayerWeights::k_norm, K::QkNorm},
      {"attn_output.weight", "self_attn.o_proj.weight", &LayerWeights::wo, K::Always},
      {"ffn_norm.weight", "post_attention_layernorm.weight", &LayerWeights::ffn_norm, K::Always},
      {"ffn_gate.weight", "mlp.gate_proj.weight", &LayerWeights::w_gate, K::Always},
      {"ffn_up.weight", "mlp.up_proj.weight", &LayerWeights::w_up, K::Always},
      {"ffn_down.weight", "mlp.down_proj.weight", &LayerWeights::w_down, K::Always},
  };
  return names;
}

std::string gguf_layer_tensor(int64_t layer, const char* suffix) { return "blk." + std::to_string(layer) + "." + suffix; }

bool layer_tensor_present(const ModelConfig& c, LayerTensorKind kind) {
  switch (kind) {
    case LayerTensorKind::Always: return true;
    case LayerTensorKind::QkvBias: return c.qkv_bias;
    case LayerTensorKind::QkNorm: return c.qk_norm;
  }
  return false;
}

std::vector<int64_t> layer_tensor_ne(const ModelConfig& c, const LayerTensorName& t) {
  const int64_t d = c.d_model, q = c.q_dim(), kv = c.kv_dim(), ff = c.d_ff;
  const TensorView LayerWeights::*m = t.member;
  if (m == &LayerWeights::attn_norm || m == &LayerWeights::ffn_norm) return {d};
  if (m == &LayerWeights::wq) return {d, q};
  if (m == &LayerWeights::wk || m == &LayerWeights::wv) return {d, kv};
  if (m == &LayerWeights::wo) return {q, d};
  if (m == &LayerWeights::bq) return {q};
  if (m == &LayerWeights::bk || m == &LayerWeights::bv) return {kv};
  if (m == &LayerWeights::q_norm || m == &LayerWeights::k_norm) return {c.head_dim};
  if (m == &LayerWeights::w_gate || m == &LayerWeights::w_up) return {d, ff};
  if (m == &LayerWeights::w_down) return {ff, d};
  fail("gguf names", std::string("no shape rule for layer tensor ") + t.gguf_suffix);
}

std::string gguf_file_type_name(uint32_t ftype) {
  switch (ftype) {
    case 0: return "all F32";
    case 1: return "mostly F16";
    case 2: return "mostly Q4_0";
    case 3: return "mostly Q4_1";
    case 7: return "mostly Q8_0";
    case 8: return "mostly Q5_0";
    case 9: return "mostly Q5_1";
    case 10: return "mostly Q2_K";
    case 11: return "Q3_K - Small";
    case 12: return "Q3_K - Medium";
    case 13: return "Q3_K - Large";
    case 14: return "Q4_K - Small";
    case 15: return "Q4_K - Medium";
    case 16: return "Q5_K - Small";
    case 17: return "Q5_K - Medium";
    case 18: return "mostly Q6_K";
    case 32: return "mostly BF16";
    default: return "unknown";
  }
}

void write_gguf_model_config(GgufWriter& w, const ModelConfig& c, uint32_t file_type) {
  using namespace gguf_key;
  const Arch a = c.arch;
  w.set("general.architecture", GgufValue::str(arch_name(a)));
  if (!c.name.empty()) w.set("general.name", GgufValue::str(c.name));
  w.set("general.file_type", GgufValue::u32(file_type));
  w.set("general.quantization_version", GgufValue::u32(2));
  w.set("general.alignment", GgufValue::u32(32));
  w.set(gguf_arch_key(a, kVocabSize), GgufValue::u32(static_cast<uint32_t>(c.vocab)));
  w.set(gguf_arch_key(a, kContextLength), GgufValue::u32(static_cast<uint32_t>(c.context)));
  w.set(gguf_arch_key(a, kEmbeddingLength), GgufValue::u32(static_cast<uint32_t>(c.d_model)));
  w.set(gguf_arch_key(a, kBlockCount), GgufValue::u32(static_cast<uint32_t>(c.n_layer)));
  w.set(gguf_arch_key(a, kFeedForwardLength), GgufValue::u32(static_cast<uint32_t>(c.d_ff)));
  w.set(gguf_arch_key(a, kHeadCount), GgufValue::u32(static_cast<uint32_t>(c.n_head)));
  w.set(gguf_arch_key(a, kHeadCountKv), GgufValue::u32(static_cast<uint32_t>(c.n_kv_head)));
  w.set(gguf_arch_key(a, kRopeFreqBase), GgufValue::f32(c.rope_theta));
  w.set(gguf_arch_key(a, kRmsEps), GgufValue::f32(c.rms_eps));
  // llama.cpp derives the head dimension as d_model / n_head unless told otherwise.
  if (c.head_dim * c.n_head != c.d_model) {
    w.set(gguf_arch_key(a, kKeyLength), GgufValue::u32(static_cast<uint32_t>(c.head_dim)));
    w.set(gguf_arch_key(a, kValueLength), GgufValue::u32(static_cast<uint32_t>(c.head_dim)));
  }
  w.set(gguf_arch_key(a, kRopeDimensionCount), GgufValue::u32(static_cast<uint32_t>(c.head_dim)));
}

}  // namespace nl
