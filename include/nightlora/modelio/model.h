// A loaded model: its configuration, views of its (frozen, possibly quantized) weights and
// its tokenizer, from a GGUF file or a Hugging Face folder. Weights are never copied: the
// views point into the memory-mapped file (GGUF, safetensors) that the Model keeps alive.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nightlora/quant/qtype.h"

namespace nl {

class Tokenizer;
class GgufFile;

enum class Arch { Llama, Qwen2, Qwen3 };
const char* arch_name(Arch a);  // "llama", "qwen2", "qwen3" (GGUF general.architecture)

// How RoPE pairs the dimensions of a head:
//  Adjacent: (2i, 2i+1)  - Meta/llama.cpp `llama` layout in GGUF (Q/K rows permuted);
//  HalfSplit: (i, i + head_dim/2) - NeoX style; Hugging Face folders, and Qwen in GGUF.
enum class RopeStyle { Adjacent, HalfSplit };

struct RopeScaling {
  // "none" or "llama3" (Llama 3.1/3.2 frequency scaling).
  std::string type = "none";
  float factor = 1.0f;
  float low_freq_factor = 1.0f;
  float high_freq_factor = 4.0f;
  int64_t original_context = 8192;
};

struct ModelConfig {
  Arch arch = Arch::Llama;
  std::string name;           // general.name or folder name
  int64_t n_layer = 0;
  int64_t d_model = 0;        // embedding length
  int64_t n_head = 0;
  int64_t n_kv_head = 0;
  int64_t head_dim = 0;       // usually d_model / n_head; Qwen3 may differ
  int64_t d_ff = 0;           // feed-forward length
  int64_t vocab = 0;
  int64_t context = 2048;
  float rms_eps = 1e-5f;
  float rope_theta = 10000.0f;
  RopeStyle rope_style = RopeStyle::Adjacent;
  RopeScaling rope_scaling;
  // Per-frequency divisors (head_dim/2 values) from GGUF `rope_freqs.weight` (llama3 scaling
  // as llama.cpp stores it); empty when absent. When present they take precedence over
  // rope_scaling: theta_i = pos * base^(-2i/head_dim) / rope_freq_factors[i].
  std::vector<float> rope_freq_factors;
  bool tied_output = false;   // output head shares token_embd
  bool qkv_bias = false;      // qwen2
  bool qk_norm = false;       // qwen3

  int64_t q_dim() const { return n_head * head_dim; }
  int64_t kv_dim() const { return n_kv_head * head_dim; }
};

// A read-only view of one weight tensor. ne is fastest-first as in GGUF: a matrix with
// `rows` output features and `cols` input features has ne = {cols, rows}, stored row-major
// (each row of `cols` elements is qtype_row_bytes(type, cols) bytes).
struct TensorView {
  std::string name;
  QType type = QType::F32;
  std::vector<int64_t> ne;
  const uint8_t* data = nullptr;
  size_t nbytes = 0;

  bool present() const { return data != nullptr; }
  int64_t cols() const { return ne.empty() ? 0 : ne[0]; }
  int64_t rows() const { return ne.size() < 2 ? 1 : ne[1]; }
  size_t row_bytes() const { return nbytes / static_cast<size_t>(rows()); }
  const uint8_t* row(int64_t r) const { return data + static_cast<size_t>(r) * row_bytes(); }
};

// The seven projections LoRA can adapt, in this canonical order.
enum class Proj { Q = 0, K, V, O, Gate, Up, Down };
constexpr int kNumProj = 7;
const char* proj_name(Proj p);  // "q","k","v","o","gate","up","down"

struct LayerWeights {
  TensorView attn_norm;                 // [d_model]
  TensorView wq, wk, wv, wo;            // wq: rows q_dim x cols d_model; wo: d_model x q_dim
  TensorView bq, bk, bv;                // qwen2 only
  TensorView q_norm, k_norm;            // qwen3 only: [head_dim]
  TensorView ffn_norm;                  // [d_model]
  TensorView w_gate, w_up, w_down;      // gate/up: d_ff x d_model; down: d_model x d_ff
  const TensorView& proj(Proj p) const;
};

struct ModelWeights {
  TensorView tok_embd;     // vocab x d_model (rows = tokens)
  TensorView output_norm;  // [d_model]
  TensorView output;       // vocab x d_model; same bytes as tok_embd when tied
  std::vector<LayerWeights> layers;
};

class Model {
 public:
  // Loads a GGUF file or a Hugging Face folder (config.json + safetensors + tokenizer.json).
  // Throws nl::Error naming the file and the problem.
  static std::unique_ptr<Model> load(const std::string& path);
  ~Model();

  ModelConfig config;
  ModelWeights weights;
  std::unique_ptr<Tokenizer> tokenizer;
  std::string source_path;
  std::string source_format;  // "gguf" or "hf"
  // The GGUF file when loaded from one (metadata, for `info` and adapter compatibility).
  const GgufFile* gguf() const { return gguf_.get(); }

  // Bytes of all weight tensors as stored (the quantized size).
  size_t weight_bytes() const;

  // Storage keeping the views alive (mapped files, or converted buffers).
  std::shared_ptr<GgufFile> gguf_;
  std::vector<std::shared_ptr<void>> storage;
};

}  // namespace nl
