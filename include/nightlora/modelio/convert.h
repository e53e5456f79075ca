// Writing models as llama.cpp-compatible GGUF files: `nightlora convert` (a Hugging Face
// folder, or any loaded Model, to GGUF of a chosen type) and the synthetic-model generator
// share this code, so both produce the same names, metadata and layouts.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "nightlora/modelio/model.h"
#include "nightlora/modelio/quantize_model.h"
#include "nightlora/quant/qtype.h"

namespace nl {

class GgufWriter;

// A tensor to write, produced one f32 row at a time (a row is ne[0] elements; there are
// product(ne[1..]) rows). `row` is called from several threads at once, for distinct rows.
struct GgufTensorSource {
  std::string name;
  std::vector<int64_t> ne;  // fastest-first, as in GGUF
  // Big matrices take the requested type; norms, biases and rope factors stay f32, as
  // llama.cpp's converter keeps them.
  bool quantize = true;
  std::function<void(int64_t row, float* dst)> row;
};

struct GgufModelWriteReport {
  std::map<std::string, int64_t> tensors_by_type;  // type name -> count
  // Tensors written as another type than the requested one because their rows are not a
  // multiple of its block size (e.g. 896-wide rows and the 256-element K-quant blocks): the
  // type llama.cpp's quantizer takes there (matrix_type_for: q4_K -> q5_0, q5_K -> q5_1,
  // q6_K -> q8_0, else f16).
  struct Fallback {
    std::string tensor;
    QType type;
  };
  std::vector<Fallback> fallbacks;
  size_t tensor_bytes = 0;
  int64_t vocab_padding = 0;  // placeholder tokens added so the vocabulary matches the embedding
};

// Writes a GGUF model: the `general.*`/`<arch>.*` metadata for `c`, the tokenizer metadata
// written by `write_tokenizer` (its vocabulary padded with "[PADn]" tokens up to c.vocab,
// as llama.cpp requires), then the tensors, quantized to `type` row by row while the file
// is written (only one tensor is in memory at a time). Atomic: temp file + rename.
GgufModelWriteReport write_gguf_model(const std::string& path, const ModelConfig& c,
                                      const std::function<void(GgufWriter&)>& write_tokenizer,
                                      const std::vector<GgufTensorSource>& tensors, const QuantTarget& target);

// The tensors of a loaded model in llama.cpp's names and layout. For the `llama`
// architecture loaded with Hugging Face's half-split Q/K rows, the rows are permuted to
// llama.cpp's adjacent-pair layout (its converter's `permute`); llama3 RoPE scaling becomes
// the `rope_freqs.weight` factors. The Model must outlive the returned sources.
std::vector<GgufTensorSource> model_tensor_sources(const Model& m);

// Converts a loaded model (Hugging Face folder or GGUF) to a GGUF file of `type`.
GgufModelWriteReport convert_model_to_gguf(const Model& m, const std::string& out_path, const QuantTarget& target);

// Row permutation of llama.cpp's converter for `llama` Q/K weights: row `out_row` of the
// GGUF (adjacent-pair) tensor is row `hf_row_for_gguf_row(out_row, head_dim)` of the
// Hugging Face (half-split) tensor. Within each head, GGUF row 2i+j is HF row j*head_dim/2+i.
int64_t hf_row_for_gguf_row(int64_t out_row, int64_t head_dim);

// llama.cpp's llama3 frequency factors (one per rotated pair, head_dim/2 values): 1 for
// high frequencies, `factor` for low ones, smoothly interpolated between.
std::vector<float> llama3_rope_freq_factors(const ModelConfig& c);

}  // namespace nl
