// Tensor element types, numbered as ggml/GGUF number them, and the scalar (reference)
// quantizers and dequantizers for each. Quantized types store rows as a sequence of blocks;
// a row of n elements takes n / block_size blocks of block_bytes each.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace nl {

enum class QType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  BF16 = 30,
};

struct QTypeInfo {
  QType type;
  const char* name;     // as llama.cpp spells it: "f32", "q4_0", "q4_K", ...
  int64_t block_size;   // elements per block (1 for plain types)
  size_t block_bytes;   // bytes per block
  bool supported;       // we can dequantize (and quantize) it
};

// Info for a raw GGUF type id, or nullptr for ids we do not know at all.
const QTypeInfo* qtype_info(uint32_t id);
const QTypeInfo& qtype_info(QType t);
inline const char* qtype_name(QType t) { return qtype_info(t).name; }

// Parses a user-facing name ("q4_0", "Q4_K", "f16", "bf16", ...). Throws nl::Error listing
// the valid names for an unknown one.
QType parse_qtype(const std::string& name);

// Bytes of one row of n elements. Throws when n is not a multiple of the block size.
size_t qtype_row_bytes(QType t, int64_t n);

// Reference dequantizer: n elements (a multiple of the block size) from src to dst.
void dequantize_row(QType t, const void* src, float* dst, int64_t n);

// Reference quantizer: n elements from src into blocks at dst (qtype_row_bytes(t, n) bytes).
void quantize_row(QType t, const float* src, void* dst, int64_t n);

}  // namespace nl
