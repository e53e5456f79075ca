// Dispatch from a type to its reference (scalar) quantizer and dequantizer. The block
// formats live in quant/blocks.h; the legacy types in quant_legacy.cpp, the K-quants in
// quant_kquants.cpp.
#include <cstdint>
#include <cstring>

#include "nightlora/quant/qtype.h"
#include "nightlora/util/error.h"
#include "nightlora/util/half.h"
#include "quant/blocks.h"

namespace nl {

namespace {

using namespace nl::quant;

// The block kernels read their structs in place, which needs the struct's alignment (2,
// for the half-float scales). A caller's buffer at an odd address is still valid input, so
// it is decoded one copied block at a time instead.
template <class Block, int kBlockElems>
void dequantize_blocks(void (*kernel)(const Block*, float*, int64_t), const void* src, float* dst, int64_t n) {
  if (reinterpret_cast<uintptr_t>(src) % alignof(Block) == 0) {
    kernel(static_cast<const Block*>(src), dst, n);
    return;
  }
  const uint8_t* p = static_cast<const uint8_t*>(src);
  for (int64_t b = 0; b < n / kBlockElems; ++b) {
    Block tmp;
    std::memcpy(&tmp, p + b * sizeof(Block), sizeof(Block));
    kernel(&tmp, dst + b * kBlockElems, kBlockElems);
  }
}

template <class Block, int kBlockElems>
void quantize_blocks(void (*kernel)(const float*, Block*, int64_t), const float* src, void* dst, int64_t n) {
  if (reinterpret_cast<uintptr_t>(dst) % alignof(Block) == 0) {
    kernel(src, static_cast<Block*>(dst), n);
    return;
  }
  uint8_t* p = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n / kBlockElems; ++b) {
    Block tmp;
    kernel(src + b * kBlockElems, &tmp, kBlockElems);
    std::memcpy(p + b * sizeof(Block), &tmp, sizeof(Block));
  }
}

uint16_t load_u16(const void* base, int64_t i) {
  uint16_t h;
  std::memcpy(&h, static_cast<const uint8_t*>(base) + 2 * i, 2);
  return h;
}

void store_u16(void* base, int64_t i, uint16_t h) { std::memcpy(static_cast<uint8_t*>(base) + 2 * i, &h, 2); }

}  // namespace

void dequantize_row(QType t, const void* src, float* dst, int64_t n) {
  qtype_row_bytes(t, n);  // throws for a length that is not whole blocks
  switch (t) {
    case QType::F32:
      std::memcpy(dst, src, static_cast<size_t>(n) * 4);
      return;
    case QType::F16:
      for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_f32(load_u16(src, i));
      return;
    case QType::BF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(load_u16(src, i));
      return;
    case QType::Q4_0: return dequantize_blocks<BlockQ4_0, kQK>(dequantize_row_q4_0, src, dst, n);
    case QType::Q4_1: return dequantize_blocks<BlockQ4_1, kQK>(dequantize_row_q4_1, src, dst, n);
    case QType::Q5_0: return dequantize_blocks<BlockQ5_0, kQK>(dequantize_row_q5_0, src, dst, n);
    case QType::Q5_1: return dequantize_blocks<BlockQ5_1, kQK>(dequantize_row_q5_1, src, dst, n);
    case QType::Q8_0: return dequantize_blocks<BlockQ8_0, kQK>(dequantize_row_q8_0, src, dst, n);
    case QType::Q4_K: return dequantize_blocks<BlockQ4_K, kQK_K>(dequantize_row_q4_K, src, dst, n);
    case QType::Q5_K: return dequantize_blocks<BlockQ5_K, kQK_K>(dequantize_row_q5_K, src, dst, n);
    case QType::Q6_K: return dequantize_blocks<BlockQ6_K, kQK_K>(dequantize_row_q6_K, src, dst, n);
    default:
      fail(std::string("type ") + qtype_info(t).name, "dequantization not supported",
           "convert the model to f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_K, q5_K or q6_K");
  }
}

void quantize_row(QType t, const float* src, void* dst, int64_t n) {
  qtype_row_bytes(t, n);
  switch (t) {
    case QType::F32:
      std::memcpy(dst, src, static_cast<size_t>(n) * 4);
      return;
    case QType::F16:
      for (int64_t i = 0; i < n; ++i) store_u16(dst, i, f32_to_fp16(src[i]));
      return;
    case QType::BF16:
      for (int64_t i = 0; i < n; ++i) store_u16(dst, i, f32_to_bf16(src[i]));
      return;
    case QType::Q4_0: return quantize_blocks<BlockQ4_0, kQK>(quantize_row_q4_0, src, dst, n);
    case QType::Q4_1: return quantize_blocks<BlockQ4_1, kQK>(quantize_row_q4_1, src, dst, n);
    case QType::Q5_0: return quantize_blocks<BlockQ5_0, kQK>(quantize_row_q5_0, src, dst, n);
    case QType::Q5_1: return quantize_blocks<BlockQ5_1, kQK>(quantize_row_q5_1, src, dst, n);
    case QType::Q8_0: return quantize_blocks<BlockQ8_0, kQK>(quantize_row_q8_0, src, dst, n);
    case QType::Q4_K: return quantize_blocks<BlockQ4_K, kQK_K>(quantize_row_q4_K, src, dst, n);
    case QType::Q5_K: return quantize_blocks<BlockQ5_K, kQK_K>(quantize_row_q5_K, src, dst, n);
    case QType::Q6_K: return quantize_blocks<BlockQ6_K, kQK_K>(quantize_row_q6_K, src, dst, n);
    default:
      fail(std::string("type ") + qtype_info(t).name, "quantization not supported",
           "choose one of f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_K, q5_K or q6_K");
  }
}

}  // namespace nl
