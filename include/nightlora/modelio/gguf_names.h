// llama.cpp's names for model metadata and weight tensors in GGUF files, in one place, so
// the converter, the synthetic-model generator and the loader agree with llama.cpp (and with
// each other) by construction.
//
//   metadata:  "<arch>.<suffix>", e.g. "llama.embedding_length", "qwen2.rope.freq_base"
//   tensors:   token_embd.weight, output_norm.weight, output.weight, rope_freqs.weight,
//              blk.<N>.attn_norm.weight, blk.<N>.attn_q.weight, blk.<N>.attn_q.bias, ...
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "nightlora/modelio/model.h"
#include "nightlora/quant/qtype.h"

namespace nl {

class GgufWriter;

// Metadata key suffixes (prefix them with the architecture via gguf_arch_key).
namespace gguf_key {
inline constexpr const char* kContextLength = "context_length";
inline constexpr const char* kEmbeddingLength = "embedding_length";
inline constexpr const char* kBlockCount = "block_count";
inline constexpr const char* kFeedForwardLength = "feed_forward_length";
inline constexpr const char* kHeadCount = "attention.head_count";
inline constexpr const char* kHeadCountKv = "attention.head_count_kv";
inline constexpr const char* kRmsEps = "attention.layer_norm_rms_epsilon";
inline constexpr const char* kKeyLength = "attention.key_length";
inline constexpr const char* kValueLength = "attention.value_length";
inline constexpr const char* kRopeFreqBase = "rope.freq_base";
inline constexpr const char* kRopeDimensionCount = "rope.dimension_count";
inline constexpr const char* kVocabSize = "vocab_size";
}  // namespace gguf_key

// "<arch>.<suffix>", e.g. gguf_arch_key(Arch::Qwen2, gguf_key::kBlockCount) = "qwen2.block_count".
std::string gguf_arch_key(Arch a, const char* suffix);

// Parses a GGUF `general.architecture` value; returns false for one we do not run.
bool parse_arch_name(const std::string& name, Arch& out);

// Whole-model tensor names.
inline constexpr const char* kTensorTokEmbd = "token_embd.weight";
inline constexpr const char* kTensorOutputNorm = "output_norm.weight";
inline constexpr const char* kTensorOutput = "output.weight";
inline constexpr const char* kTensorRopeFreqs = "rope_freqs.weight";

// The tensors of one decoder block, with their llama.cpp name (after "blk.N.") and the
// LayerWeights member that holds them. `kind` tells which models have the tensor.
enum class LayerTensorKind { Always, QkvBias, QkNorm };
struct LayerTensorName {
  const char* gguf_suffix;         // e.g. "attn_q.weight"
  const char* hf_suffix;           // after "model.layers.N.", e.g. "self_attn.q_proj.weight"
  TensorView LayerWeights::*member;
  LayerTensorKind kind;
};
// In llama.cpp's converter order (norm, q, k, v, o, ..., ffn).
const std::vector<LayerTensorName>& layer_tensor_names();

// "blk.<layer>.<suffix>"
std::string gguf_layer_tensor(int64_t layer, const char* suffix);
// Whether a model with this configuration has the tensor.
bool layer_tensor_present(const ModelConfig& c, LayerTensorKind kind);

// The expected GGUF shape (fastest-first) of a layer tensor for a configuration.
std::vector<int64_t> layer_tensor_ne(const ModelConfig& c, const LayerTensorName& t);

// Human-readable name of a file type value ("Q4_K - Small", ...), "unknown" otherwise.
std::string gguf_file_type_name(uint32_t ftype);

// Writes the `general.*` and `<arch>.*` keys llama.cpp reads for this configuration
// (architecture, name, lengths, heads, eps, rope base/dimensions, key/value length when the
// head dimension is not d_model / n_head, file type (llama_ftype_for), quantization version,
// alignment).
void write_gguf_model_config(GgufWriter& w, const ModelConfig& c, uint32_t file_type);

}  // namespace nl
