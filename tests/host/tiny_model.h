// Tiny random models built in memory (no file, no tokenizer) for the host-step tests:
// llama (adjacent RoPE), qwen2 (QKV bias, half-split RoPE) and qwen3 (Q/K norm, head_dim
// not d_model / n_head), all with grouped-query attention, F32 or quantized matrices.
#pragma once
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "nightlora/data/batch.h"
#include "nightlora/host/lora.h"
#include "nightlora/modelio/model.h"
#include "nightlora/quant/qtype.h"
#include "nightlora/tokenizer/tokenizer.h"

namespace nltest {

struct TinyModel {
  std::unique_ptr<nl::Model> model = std::make_unique<nl::Model>();
  std::vector<std::shared_ptr<std::vector<uint8_t>>> buffers;

  nl::TensorView tensor(const std::string& name, nl::QType type, int64_t rows, int64_t cols, std::mt19937& rng,
                        float mean, float stddev) {
    std::normal_distribution<float> nd(mean, stddev);
    const size_t rb = nl::qtype_row_bytes(type, cols);
    auto buf = std::make_shared<std::vector<uint8_t>>(rb * static_cast<size_t>(rows));
    std::vector<float> row(static_cast<size_t>(cols));
    for (int64_t r = 0; r < rows; ++r) {
      for (auto& v : row) v = nd(rng);
      nl::quantize_row(type, row.data(), buf->data() + rb * static_cast<size_t>(r), cols);
    }
    buffers.push_back(buf);
    nl::TensorView t;
    t.name = name;
    t.type = type;
    t.ne = rows == 1 ? std::vector<int64_t>{cols} : std::vector<int64_t>{cols, rows};
    t.data = buf->data();
    t.nbytes = buf->size();
    return t;
  }
};

// arch: "llama", "qwen2" or "qwen3". Matrices of type `type` (F32 for gradient checks).
inline TinyModel make_tiny_model(const std::string& arch, nl::QType type = nl::QType::F32, uint32_t seed = 1,
                                 bool tied = false) {
  TinyModel tm;
  nl::ModelConfig& c = tm.model->config;
  c.arch = arch == "qwen2" ? nl::Arch::Qwen2 : arch == "qwen3" ? nl::Arch::Qwen3 : nl::Arch::Llama;
  c.name = "tiny-" + arch;
  c.n_layer = 2;
  c.d_model = 32;
  c.n_head = 4;
  c.n_kv_head = 2;
  c.head_dim = arch == "qwen3" ? 16 : 8;  // qwen3: q_dim 64 != d_model
  c.d_ff = 64;
  c.vocab = 40;
  c.rms_eps = 1e-5f;
  c.rope_theta = arch == "llama" ? 10000.0f : 1000000.0f;
  c.rope_style = arch == "llama" ? nl::RopeStyle::Adjacent : nl::RopeStyle::HalfSplit;
  c.qkv_bias = arch == "qwen2";
  c.qk_norm = arch == "qwen3";
  c.tied_output = tied;
  std::mt19937 rng(seed);
  const float s = 0.2f;
  nl::ModelWeights& w = tm.model->weights;
  w.tok_embd = tm.tensor("token_embd.weight", type, c.vocab, c.d_model, rng, 0.0f, 1.0f);
  w.output_norm = tm.tensor("output_norm.weight", nl::QType::F32, 1, c.d_model, rng, 1.0f, 0.1f);
  w.output = tied ? w.tok_embd : tm.tensor("output.weight", type, c.vocab, c.d_model, rng, 0.0f, s);
  for (int64_t l = 0; l < c.n_layer; ++l) {
    nl::LayerWeights L;
    const std::string p = "blk." + std::to_string(l) + ".";
    L.attn_norm = tm.tensor(p + "attn_norm.weight", nl::QType::F32, 1, c.d_model, rng, 1.0f, 0.1f);
    L.wq = tm.tensor(p + "attn_q.weight", type, c.q_dim(), c.d_model, rng, 0.0f, s);
    L.wk = tm.tensor(p + "attn_k.weight", type, c.kv_dim(), c.d_model, rng, 0.0f, s);
    L.wv = tm.tensor(p + "attn_v.weight", type, c.kv_dim(), c.d_model, rng, 0.0f, s);
    L.wo = tm.tensor(p + "attn_output.weight", type, c.d_model, c.q_dim(), rng, 0.0f, s);
    if (c.qkv_bias) {
      L.bq = tm.tensor(p + "attn_q.bias", nl::QType::F32, 1, c.q_dim(), rng, 0.0f, 0.2f);
      L.bk = tm.tensor(p + "attn_k.bias", nl::QType::F32, 1, c.kv_dim(), rng, 0.0f, 0.2f);
      L.bv = tm.tensor(p + "attn_v.bias", nl::QType::F32, 1, c.kv_dim(), rng, 0.0f, 0.2f);
    }
    if (c.qk_norm) {
      L.q_norm = tm.tensor(p + "attn_q_norm.weight", nl::QType::F32, 1, c.head_dim, rng, 1.0f, 0.1f);
      L.k_norm = tm.tensor(p + "attn_k_norm.weight", nl::QType::F32, 1, c.head_dim, rng, 1.0f, 0.1f);
    }
    L.ffn_norm = tm.tensor(p + "ffn_norm.weight", nl::QType::F32, 1, c.d_model, rng, 1.0f, 0.1f);
    L.w_gate = tm.tensor(p + "ffn_gate.weight", type, c.d_ff, c.d_model, rng, 0.0f, s);
    L.w_up = tm.tensor(p + "ffn_up.weight", type, c.d_ff, c.d_model, rng, 0.0f, s);
    L.w_down = tm.tensor(p + "ffn_down.weight", type, c.d_model, c.d_ff, rng, 0.0f, s);
    w.layers.push_back(L);
  }
  return tm;
}

// Sequences of the given lengths packed into one batch. Every position predicts the next
// token of its sequence, except the last of each sequence and the first `prompt` positions
// (unsupervised, as a prompt would be).
inline nl::Batch make_batch(const std::vector<int64_t>& lengths, int64_t vocab, int64_t prompt, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(vocab - 1));
  nl::Batch b;
  b.seq_start.push_back(0);
  for (int64_t len : lengths) {
    const int64_t s0 = b.n_tokens();
    for (int64_t i = 0; i < len; ++i) b.tokens.push_back(tok(rng));
    for (int64_t i = 0; i < len; ++i)
      b.labels.push_back(i + 1 < len && i >= prompt ? b.tokens[static_cast<size_t>(s0 + i + 1)] : -1);
    b.seq_start.push_back(b.n_tokens());
  }
  return b;
}

// An adapter with random A and B (B nonzero, so every gradient kind is nonzero).
inline nl::LoraAdapter random_adapter(const nl::ModelConfig& m, nl::LoraConfig cfg, uint32_t seed, float b_std = 0.2f) {
  nl::LoraAdapter a = nl::LoraAdapter::init(m, cfg);
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, b_std);
  for (auto& p : a.pairs)
    for (auto& v : p.B) v = nd(rng);
  return a;
}

}  // namespace nltest
