// Byte layouts of ggml's quantized blocks (ggml-common.h), and the scalar reference
// quantizer/dequantizer of each type. Internal to the library: later SIMD kernels
// (src/engine) include this header to read the same blocks and are tested against these
// reference functions.
//
// All multi-byte fields are little-endian, as in GGUF files; scales are IEEE half floats
// stored as raw uint16_t bits (nl::fp16_to_f32 decodes them). Every struct is made only
// of uint8_t/uint16_t members so there is no padding: sizeof equals the on-disk size.
#pragma once
#include <cstdint>

namespace nl::quant {

// Legacy types: 32 elements per block, one scale (and for *_1 one min) per block.
inline constexpr int kQK = 32;

// x = d * (q - 8), q in 0..15. qs[j] holds element j in its low nibble and element j+16
// in its high nibble.
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[kQK / 2];
};

// x = d * q + m, q in 0..15; nibbles packed as in Q4_0.
struct BlockQ4_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qs[kQK / 2];
};

// x = d * (q - 16), q in 0..31. The low 4 bits are packed as in Q4_0; bit 4 of element j
// is bit j of the little-endian 32-bit word qh.
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
// The block's values q - 16 in element order (x = d times each): the reference dequantizer,
// the cpu engine's Q8_0 tiles of Q5_0 weights and the int8 reference all read them here.
inline void q5_0_values(const BlockQ5_0& b, int8_t out[kQK]) {
  const uint32_t qh = static_cast<uint32_t>(b.qh[0]) | static_cast<uint32_t>(b.qh[1]) << 8 |
                      static_cast<uint32_t>(b.qh[2]) << 16 | static_cast<uint32_t>(b.qh[3]) << 24;
  for (int j = 0; j < kQK / 2; ++j) {
    out[j] = static_cast<int8_t>(((b.qs[j] & 0x0F) | static_cast<int>((qh >> j) & 1) << 4) - 16);
    out[j + kQK / 2] = static_cast<int8_t>(((b.qs[j] >> 4) | static_cast<int>((qh >> (j + kQK / 2)) & 1) << 4) - 16);
  }
}

// x = d * q + m, q in 0..31; bits packed as in Q5_0.
struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};

// x = d * q, q a signed byte.
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kQK];
};

// K-quants: super-blocks of 256 elements split into sub-blocks with their own small
// integer scales, themselves scaled by the block's half-float d (and dmin).
inline constexpr int kQK_K = 256;
inline constexpr int kKScaleBytes = 12;

// 8 sub-blocks of 32: x = d * sc[j] * q - dmin * m[j], q in 0..15. The eight 6-bit
// scales sc[j] and mins m[j] are packed into 12 bytes (see unpack_scale_min_k4).
// qs holds 64 elements per 32 bytes: sub-block 2i in the low nibbles, 2i+1 in the high.
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qs[kQK_K / 2];
};

// As Q4_K with q in 0..31: bit 4 of element 64*i + l (l < 32) is bit 2i of qh[l], and of
// element 64*i + 32 + l is bit 2i+1 of qh[l].
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qh[kQK_K / 8];
  uint8_t qs[kQK_K / 2];
};

// 16 sub-blocks of 16: x = d * scales[j] * (q - 32), q in 0..63, scales signed bytes.
// Each half (128 elements) uses 64 bytes of ql and 32 of qh: for l < 32, element l has
// its low nibble in ql[l] (low) and high bits in qh[l] bits 0-1; element l+32: ql[l+32]
// low, qh bits 2-3; element l+64: ql[l] high, qh bits 4-5; element l+96: ql[l+32] high,
// qh bits 6-7. Note that d comes last.
struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];
  uint8_t qh[kQK_K / 4];
  int8_t scales[kQK_K / 16];
  uint16_t d;
};

static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);

// The 6-bit scale and min of sub-block j (0..7) of a Q4_K/Q5_K block: for j < 4 they are
// the low 6 bits of bytes j and j+4; for j >= 4 the low 4 bits come from the nibbles of
// byte j+4 and the high 2 bits from the top bits of bytes j-4 (scale) and j (min).
inline void unpack_scale_min_k4(int j, const uint8_t* q, uint8_t* scale, uint8_t* min) {
  if (j < 4) {
    *scale = q[j] & 63;
    *min = q[j + 4] & 63;
  } else {
    *scale = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *min = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// Whether the reference dequantizers (compiled for the baseline instruction set) evaluate
// Q4_K/Q5_K's `scale * q - min` with one fused multiply-subtract: GCC contracts a*b-c where
// the baseline has FMA (-march=native on an FMA machine). Kernels that must give the same
// bits read this; they include this header before a target pragma turns FMA on for them.
#if defined(__FMA__) || defined(__ARM_FEATURE_FMA)
#define NL_REFERENCE_FUSES_MUL_SUB 1
#else
#define NL_REFERENCE_FUSES_MUL_SUB 0
#endif

// The float scales and mins of group g (values 64g .. 64g+63: sub-blocks 2g and 2g+1) of a
// Q4_K/Q5_K block with super-block scales d and dmin, as the reference dequantizers form
// them: value = scale * q - min, per sub-block.
struct KGroupScales {
  float scale1, min1, scale2, min2;
};
inline KGroupScales kquant_group_scales(const uint8_t* scales, float d, float dmin, int g) {
  uint8_t sc, mn;
  KGroupScales s;
  unpack_scale_min_k4(2 * g, scales, &sc, &mn);
  s.scale1 = d * sc;
  s.min1 = dmin * mn;
  unpack_scale_min_k4(2 * g + 1, scales, &sc, &mn);
  s.scale2 = d * sc;
  s.min2 = dmin * mn;
  return s;
}

// The inverse of unpack_scale_min_k4 for all 8 sub-blocks at once (values 0..63).
inline void pack_scales_mins_k4(const uint8_t scale[8], const uint8_t min[8], uint8_t q[kKScaleBytes]) {
  for (int j = 0; j < kKScaleBytes; ++j) q[j] = 0;
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      q[j] = scale[j];
      q[j + 4] = min[j];
    } else {
      q[j + 4] = (scale[j] & 0xF) | ((min[j] & 0xF) << 4);
      q[j - 4] |= (scale[j] >> 4) << 6;
      q[j] |= (min[j] >> 4) << 6;
    }
  }
}

// Reference (scalar) kernels. `n` is the number of elements, a multiple of the block size.
void dequantize_row_q4_0(const BlockQ4_0* x, float* y, int64_t n);
void dequantize_row_q4_1(const BlockQ4_1* x, float* y, int64_t n);
void dequantize_row_q5_0(const BlockQ5_0* x, float* y, int64_t n);
void dequantize_row_q5_1(const BlockQ5_1* x, float* y, int64_t n);
void dequantize_row_q8_0(const BlockQ8_0* x, float* y, int64_t n);
void dequantize_row_q4_K(const BlockQ4_K* x, float* y, int64_t n);
void dequantize_row_q5_K(const BlockQ5_K* x, float* y, int64_t n);
void dequantize_row_q6_K(const BlockQ6_K* x, float* y, int64_t n);

void quantize_row_q4_0(const float* x, BlockQ4_0* y, int64_t n);
void quantize_row_q4_1(const float* x, BlockQ4_1* y, int64_t n);
void quantize_row_q5_0(const float* x, BlockQ5_0* y, int64_t n);
void quantize_row_q5_1(const float* x, BlockQ5_1* y, int64_t n);
void quantize_row_q8_0(const float* x, BlockQ8_0* y, int64_t n);
void quantize_row_q4_K(const float* x, BlockQ4_K* y, int64_t n);
void quantize_row_q5_K(const float* x, BlockQ5_K* y, int64_t n);
void quantize_row_q6_K(const float* x, BlockQ6_K* y, int64_t n);

}  // namespace nl::quant
