// Re-quantizing a GGUF model file: `nightlora quantize in.gguf out.gguf --type q4_K`.
// Every 2-D weight matrix is converted to the requested type, one row at a time, straight
// from the memory-mapped input into the output file; everything else (1-D norms and
// biases, all metadata) is copied unchanged except `general.file_type`.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "nightlora/quant/qtype.h"

namespace nl {

class ThreadPool;
struct GgufTensorInfo;

// What a quantization writes (`quantize`, `convert`, `synth-model` and their --type): one
// type for every matrix, or `medium`, llama.cpp's _M mix of q4_K or q5_K (q4_K_M, q5_K_M: the
// files most people download), as its quantizer (llama_tensor_get_type) makes it for llama
// and qwen models: the output head, or the embedding when the head is tied to it, q6_K (q8_0
// when its rows are not whole super-blocks); attn_v and ffn_down q6_K in the layers
// use_more_bits picks (the first and last eighth, and every third between); the other
// matrices the base type; then the fallbacks of matrix_type_for. (llama.cpp also gives a
// plain q4_0 file a q6_K head; a plain type here means every matrix of that type.)
struct QuantTarget {
  QType type = QType::F16;
  bool medium = false;
  QuantTarget() = default;
  QuantTarget(QType t, bool m = false) : type(t), medium(m) {}  // NOLINT: a plain type is a target
};
// A type name (q4_0, q4_K, ...) or q4_K_M / q5_K_M (any case for the suffix). Throws nl::Error
// listing what is accepted.
QuantTarget parse_quant_target(const std::string& name);
std::string quant_target_name(const QuantTarget& t);

// llama.cpp's `llama_ftype` (the GGUF key `general.file_type`) for a file written for t:
// e.g. q4_0 -> 2 (MOSTLY_Q4_0), q4_K -> 14 (MOSTLY_Q4_K_S, "all Q4_K"), q4_K_M -> 15,
// q6_K -> 18. Throws nl::Error for a type with no such value.
uint32_t llama_ftype_for(const QuantTarget& t);

// Whether layer i of n gets more bits in the _M mixes (llama.cpp's use_more_bits).
inline bool use_more_bits(int64_t i, int64_t n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

// Whether a tensor is a weight matrix that quantization converts: its name ends in
// ".weight" and it has exactly 2 dimensions. 1-D tensors (norms, biases) stay as they are.
bool is_quantizable_matrix(const std::string& name, const std::vector<int64_t>& ne);

// The type a matrix with rows of `row_len` elements gets when `wanted` is requested. Rows
// that are not whole blocks of `wanted` fall back as llama.cpp's quantizer does: q4_K ->
// q5_0, q5_K -> q5_1, q6_K -> q8_0, and to f16 when the row does not fit that type (or a
// 32-block type) either. `why`, when given, receives a one-line reason for a fallback
// (and is cleared otherwise).
QType matrix_type_for(QType wanted, int64_t row_len, std::string* why = nullptr);
// The type the matrix `tensor` (its GGUF name, "blk.3.attn_v.weight") gets for target t in a
// model of n_layer blocks, with or without a separate output.weight: the mix's choice (above),
// then matrix_type_for's fallback (`why` as there).
QType matrix_type_for(const QuantTarget& t, const std::string& tensor, int64_t row_len, int64_t n_layer,
                      bool separate_output, std::string* why = nullptr);

// Changes one row's f32 values in place before they are written (`merge` adds the LoRA
// product here). Called from several threads at once, for distinct rows.
using RowAdjust = std::function<void(int64_t row, float* values)>;

// Converts one tensor of the file `file` row by row into `dst` (dst_bytes bytes of type
// `to`): dequantize a source row to f32, adjust it (when given), check it is finite,
// quantize it. Each worker holds one row of floats; rows are independent, so the output
// does not depend on the number of threads. Throws nl::Error naming the tensor, row and
// column of the first non-finite value.
void convert_tensor_rows(const GgufTensorInfo& t, QType to, uint8_t* dst, size_t dst_bytes, const std::string& file,
                         ThreadPool& pool, const RowAdjust& adjust = {});

struct TensorQuantResult {
  std::string name;
  std::vector<int64_t> ne;  // fastest-first, as in GGUF
  QType from = QType::F32;
  QType to = QType::F32;
  size_t bytes_in = 0;
  size_t bytes_out = 0;
  bool converted = false;   // false: copied byte for byte (not a matrix, or already that type)
  std::string fallback;     // non-empty when `to` differs from the requested type: why
};

struct QuantizeSummary {
  QuantTarget requested;
  uint32_t file_type = 0;   // written as general.file_type
  std::vector<TensorQuantResult> tensors;  // in file order
  size_t bytes_in = 0;      // tensor data, before
  size_t bytes_out = 0;     // tensor data, after
  size_t file_bytes_in = 0;
  size_t file_bytes_out = 0;
  int n_converted = 0;
  int n_fallback = 0;
};

// Reads `in_path`, writes `out_path` (atomically: a temporary file renamed at the end, so
// a failure never leaves a partial output). The target's type must be one we can quantize
// to (qtype_info(type).supported). Throws nl::Error naming the file and tensor for anything
// wrong: an unreadable input, a matrix of a type we cannot dequantize, non-finite values.
// Rows are spread over `n_threads` threads (<= 0: one per hardware thread); the output is
// the same for any number.
QuantizeSummary quantize_gguf(const std::string& in_path, const std::string& out_path, const QuantTarget& target,
                              int n_threads = 0);

// A human-readable report of a summary: one line per tensor (unless per_tensor is false),
// then the fallbacks and the totals.
std::string format_quantize_summary(const QuantizeSummary& s, bool per_tensor = true);

}  // namespace nl
