// AVX2 + FMA + F16C panel kernels. Compiled for those instructions function by function
// (the pragma below), so the library still runs on any x86-64; dispatch.cpp only hands
// them out when x86_features() says the CPU (and the OS) has all three.
//
// Register blocking: input grad keeps 4 tokens x 24 columns of dX in 12 registers while a
// tall panel (many row groups) streams through them (7 loads per 12 FMAs), so dX is loaded
// and stored once per panel, not once per 8 rows. Forward transposes its 24-row panel a
// chunk of columns at a time and runs the same kernel (Y's 24 outputs per token in
// registers).
#include "kernels.h"
#include "cpu_features_x86.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "../quant/blocks.h"

// (blocks.h, before the target pragma: NL_REFERENCE_FUSES_MUL_SUB from the baseline flags)
#if defined(__clang__)  // clang ignores GCC target pragmas: the same features, per function
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif

namespace nl::engine {
namespace {

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline float half_at(const uint8_t* p) {
  uint16_t bits;
  std::memcpy(&bits, p, 2);
  return _cvtsh_ss(bits);
}

// 16 signed bytes -> 2 x 8 floats times d, stored at y.
inline void store_scaled_i8x16(__m128i q, __m256 d, float* y) {
  _mm256_storeu_ps(y + 0, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), d));
  _mm256_storeu_ps(y + 8, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q, 8))), d));
}

// Q4_0 / Q8_0 tiles (scales first). F16C converts every half (subnormals included)
// exactly, and each element is one float multiply, as in the reference dequantizer.
void dequantize_legacy_row(const TiledMatrix& m, const uint8_t* t, int64_t nr, int64_t i, float* y) {
  const size_t quant_bytes = m.block_bytes - sizeof(uint16_t);
  const __m256 d = _mm256_set1_ps(half_at(t + i * 2));
  const uint8_t* q = t + static_cast<size_t>(nr) * sizeof(uint16_t) + static_cast<size_t>(i) * quant_bytes;
  __m128i lo, hi;  // elements 0..15 and 16..31 as signed bytes
  if (m.type == QType::Q4_0) {
    const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
    const __m128i low_nibbles = _mm_set1_epi8(0x0F), eight = _mm_set1_epi8(8);
    lo = _mm_sub_epi8(_mm_and_si128(raw, low_nibbles), eight);
    hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(raw, 4), low_nibbles), eight);
  } else {
    lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
    hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 16));
  }
  store_scaled_i8x16(lo, d, y);
  store_scaled_i8x16(hi, d, y + 16);
}

// 8 unsigned 4-bit levels -> d1 * q - m1, rounded as the reference rounds it.
inline __m256 q4k_value(__m128i q8, __m256 d1, __m256 m1) {
  const __m256 q = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(q8));
#if NL_REFERENCE_FUSES_MUL_SUB
  return _mm256_fmsub_ps(d1, q, m1);
#else
  __m256 prod = _mm256_mul_ps(d1, q);
  asm("" : "+x"(prod));  // keeps the compiler from fusing the multiply into the subtraction
  return _mm256_sub_ps(prod, m1);
#endif
}

// One group of 64 values of a Q4_K/Q5_K super-block: 32 levels of its first sub-block in lo
// and 32 of its second in hi (one per byte), each sub-block with its scale and min.
inline void store_q4k_group(__m256i lo, __m256i hi, __m256 d1, __m256 m1, __m256 d2, __m256 m2, float* y) {
  const __m128i lo0 = _mm256_castsi256_si128(lo), lo1 = _mm256_extracti128_si256(lo, 1);
  const __m128i hi0 = _mm256_castsi256_si128(hi), hi1 = _mm256_extracti128_si256(hi, 1);
  _mm256_storeu_ps(y + 0, q4k_value(lo0, d1, m1));
  _mm256_storeu_ps(y + 8, q4k_value(_mm_srli_si128(lo0, 8), d1, m1));
  _mm256_storeu_ps(y + 16, q4k_value(lo1, d1, m1));
  _mm256_storeu_ps(y + 24, q4k_value(_mm_srli_si128(lo1, 8), d1, m1));
  _mm256_storeu_ps(y + 32, q4k_value(hi0, d2, m2));
  _mm256_storeu_ps(y + 40, q4k_value(_mm_srli_si128(hi0, 8), d2, m2));
  _mm256_storeu_ps(y + 48, q4k_value(hi1, d2, m2));
  _mm256_storeu_ps(y + 56, q4k_value(_mm_srli_si128(hi1, 8), d2, m2));
}

// Half h (128 values) of a Q4_K super-block (quant::dequantize_row_q4_K): sub-block scales d*sc and mins
// dmin*m are the same scalar float products as in the reference.
void dequantize_q4k_half(const quant::BlockQ4_K* x, int h, float* y) {
  const float d = half_at(reinterpret_cast<const uint8_t*>(&x->d));
  const float dmin = half_at(reinterpret_cast<const uint8_t*>(&x->dmin));
  const __m256i low_nibbles = _mm256_set1_epi8(0x0F);
  for (int g = 2 * h; g < 2 * h + 2; ++g, y += 64) {  // the half's two groups of 64
    const quant::KGroupScales k = quant::kquant_group_scales(x->scales, d, dmin, g);
    const __m256 d1 = _mm256_set1_ps(k.scale1), m1 = _mm256_set1_ps(k.min1);
    const __m256 d2 = _mm256_set1_ps(k.scale2), m2 = _mm256_set1_ps(k.min2);
    const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x->qs + 32 * g));
    const __m256i lo = _mm256_and_si256(raw, low_nibbles);
    const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), low_nibbles);
    store_q4k_group(lo, hi, d1, m1, d2, m2, y);
  }
}

// Half h of a Q5_K super-block (quant::dequantize_row_q5_K): Q4_K's nibbles with a fifth bit
// from qh (bit 2g of qh[l] for the group's low nibbles, bit 2g+1 for its high ones), the
// same scalar scale and min products and the same rounding as q4k_value.
void dequantize_q5k_half(const quant::BlockQ5_K* x, int h, float* y) {
  const float d = half_at(reinterpret_cast<const uint8_t*>(&x->d));
  const float dmin = half_at(reinterpret_cast<const uint8_t*>(&x->dmin));
  const __m256i low_nibbles = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
  const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x->qh));
  for (int g = 2 * h; g < 2 * h + 2; ++g, y += 64) {  // the half's two groups of 64
    const quant::KGroupScales k = quant::kquant_group_scales(x->scales, d, dmin, g);
    const __m256 d1 = _mm256_set1_ps(k.scale1), m1 = _mm256_set1_ps(k.min1);
    const __m256 d2 = _mm256_set1_ps(k.scale2), m2 = _mm256_set1_ps(k.min2);
    const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x->qs + 32 * g));
    // Bit 4 of each level: shifts on 16-bit lanes, the mask keeps one bit per byte, so the
    // left shift by 4 cannot cross into the next byte.
    const __m256i bit_lo = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * g), one), 4);
    const __m256i bit_hi = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * g + 1), one), 4);
    const __m256i lo = _mm256_or_si256(_mm256_and_si256(raw, low_nibbles), bit_lo);
    const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(raw, 4), low_nibbles), bit_hi);
    store_q4k_group(lo, hi, d1, m1, d2, m2, y);
  }
}

// Half h (128 values) of a Q6_K super-block (quant::dequantize_row_q6_K): 32 levels at a time from ql/qh, each
// 16 with the scale (d * sc) times the level, the reference's two rounded multiplies.
void dequantize_q6k_half(const quant::BlockQ6_K* x, int h, float* y) {
  const float d = half_at(reinterpret_cast<const uint8_t*>(&x->d));
  const __m256i low_nibbles = _mm256_set1_epi8(0x0F), high_pair = _mm256_set1_epi8(0x30);
  const __m256i thirty_two = _mm256_set1_epi8(32);
  {  // the half's 128 values
    const uint8_t* ql = x->ql + 64 * h;
    const int8_t* sc = x->scales + 8 * h;
    const __m256i ql0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql));
    const __m256i ql1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql + 32));
    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x->qh + 32 * h));
    // Byte shifts done on 16-bit lanes: the masks drop the bits that cross bytes.
    const __m256i q[4] = {
        _mm256_or_si256(_mm256_and_si256(ql0, low_nibbles), _mm256_and_si256(_mm256_slli_epi16(qh, 4), high_pair)),
        _mm256_or_si256(_mm256_and_si256(ql1, low_nibbles), _mm256_and_si256(_mm256_slli_epi16(qh, 2), high_pair)),
        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low_nibbles), _mm256_and_si256(qh, high_pair)),
        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low_nibbles),
                        _mm256_and_si256(_mm256_srli_epi16(qh, 2), high_pair)),
    };
    for (int k = 0; k < 4; ++k) {  // elements 32k .. 32k+31 of this half
      const __m256i s = _mm256_sub_epi8(q[k], thirty_two);
      store_scaled_i8x16(_mm256_castsi256_si128(s), _mm256_set1_ps(d * sc[2 * k]), y + 32 * k);
      store_scaled_i8x16(_mm256_extracti128_si256(s, 1), _mm256_set1_ps(d * sc[2 * k + 1]), y + 32 * k + 16);
    }
  }
}

void dequantize_tiles_avx2(const TiledMatrix& m, int64_t g, int64_t c0, int64_t c1, float* panel, int64_t ld) {
  if (!has_tiled_layout(m.type)) return dequantize_tiles_scalar(m, g, c0, c1, panel, ld);  // its error
  const int64_t nr = m.group_rows(g);
  for_each_unit_row(m, g, c0, c1, panel, ld, [&](const uint8_t* t, int64_t i, int half, float* y) {
    const uint8_t* block = t + static_cast<size_t>(i) * m.block_bytes;  // K-quants, F16
    switch (m.type) {
      case QType::Q4_0:
      case QType::Q8_0: dequantize_legacy_row(m, t, nr, i, y); break;
      case QType::Q4_K: dequantize_q4k_half(reinterpret_cast<const quant::BlockQ4_K*>(block), half, y); break;
      case QType::Q5_K: dequantize_q5k_half(reinterpret_cast<const quant::BlockQ5_K*>(block), half, y); break;
      case QType::Q6_K: dequantize_q6k_half(reinterpret_cast<const quant::BlockQ6_K*>(block), half, y); break;
      case QType::F16:
        for (int j = 0; j < kTileCols; j += 8)
          _mm256_storeu_ps(y + j, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 2 * j))));
        break;
      default: break;  // not a tiled type: excluded above
    }
  });
}

// R rows x NT tokens of Y, each a dot product over n columns: the forward's rows past a
// multiple of 8 (untiled types only).
template <int R, int NT>
inline void forward_block(const float* X, int64_t ldx, const float* P, int64_t ldp, int64_t n, float* Y, int64_t ldy,
                          bool accumulate) {
  __m256 acc[NT][R];
  for (int t = 0; t < NT; ++t)
    for (int r = 0; r < R; ++r) acc[t][r] = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) {
    __m256 w[R];
    for (int r = 0; r < R; ++r) w[r] = _mm256_loadu_ps(P + r * ldp + k);
    for (int t = 0; t < NT; ++t) {
      const __m256 x = _mm256_loadu_ps(X + t * ldx + k);
      for (int r = 0; r < R; ++r) acc[t][r] = _mm256_fmadd_ps(x, w[r], acc[t][r]);
    }
  }
  for (int t = 0; t < NT; ++t)
    for (int r = 0; r < R; ++r) {
      float s = hsum(acc[t][r]);
      for (int64_t j = k; j < n; ++j) s += X[t * ldx + j] * P[r * ldp + j];
      Y[t * ldy + r] = accumulate ? Y[t * ldy + r] + s : s;
    }
}

template <int R>
inline void forward_rows(const float* X, int64_t ldx, int64_t nt, const float* P, int64_t ldp, int64_t n, float* Y,
                         int64_t ldy, bool accumulate) {
  int64_t t = 0;
  for (; t + 3 <= nt; t += 3) forward_block<R, 3>(X + t * ldx, ldx, P, ldp, n, Y + t * ldy, ldy, accumulate);
  for (; t < nt; ++t) forward_block<R, 1>(X + t * ldx, ldx, P, ldp, n, Y + t * ldy, ldy, accumulate);
}

void forward_dot(const float* X, int64_t ldx, int64_t nt, const float* P, int64_t ldp, int64_t nr, int64_t n,
                 float* Y, int64_t ldy, bool accumulate) {
  int64_t i = 0;
  for (; i + 4 <= nr; i += 4) forward_rows<4>(X, ldx, nt, P + i * ldp, ldp, n, Y + i, ldy, accumulate);
  for (; i < nr; ++i) forward_rows<1>(X, ldx, nt, P + i * ldp, ldp, n, Y + i, ldy, accumulate);
}

// NT tokens x (V vectors of 8 columns) of D, kept in registers while the nr panel rows
// stream through them in increasing order (the reference order, each step one FMA).
// NT x V <= 12 accumulators + V weights + 1 broadcast fit the 16 ymm registers.
template <int NT, int V>
inline void input_grad_block(const float* G, int64_t ldg, const float* P, int64_t ldp, int64_t nr, float* D,
                             int64_t ldd);

// The main block, written out with named accumulators: from the array form GCC 12 stored
// all 12 accumulators to the stack on every row (12 stores per 12 FMAs), which halved the
// kernel's speed on a one-store-per-cycle core.
template <>
inline void input_grad_block<4, 3>(const float* G, int64_t ldg, const float* P, int64_t ldp, int64_t nr, float* D,
                                   int64_t ldd) {
  float* d0 = D;
  float* d1 = D + ldd;
  float* d2 = D + 2 * ldd;
  float* d3 = D + 3 * ldd;
  __m256 a00 = _mm256_loadu_ps(d0), a01 = _mm256_loadu_ps(d0 + 8), a02 = _mm256_loadu_ps(d0 + 16);
  __m256 a10 = _mm256_loadu_ps(d1), a11 = _mm256_loadu_ps(d1 + 8), a12 = _mm256_loadu_ps(d1 + 16);
  __m256 a20 = _mm256_loadu_ps(d2), a21 = _mm256_loadu_ps(d2 + 8), a22 = _mm256_loadu_ps(d2 + 16);
  __m256 a30 = _mm256_loadu_ps(d3), a31 = _mm256_loadu_ps(d3 + 8), a32 = _mm256_loadu_ps(d3 + 16);
  const float* g0 = G;
  const float* g1 = G + ldg;
  const float* g2 = G + 2 * ldg;
  const float* g3 = G + 3 * ldg;
  for (int64_t i = 0; i < nr; ++i, P += ldp) {
    const __m256 w0 = _mm256_loadu_ps(P), w1 = _mm256_loadu_ps(P + 8), w2 = _mm256_loadu_ps(P + 16);
    __m256 b = _mm256_broadcast_ss(g0 + i);
    a00 = _mm256_fmadd_ps(b, w0, a00), a01 = _mm256_fmadd_ps(b, w1, a01), a02 = _mm256_fmadd_ps(b, w2, a02);
    b = _mm256_broadcast_ss(g1 + i);
    a10 = _mm256_fmadd_ps(b, w0, a10), a11 = _mm256_fmadd_ps(b, w1, a11), a12 = _mm256_fmadd_ps(b, w2, a12);
    b = _mm256_broadcast_ss(g2 + i);
    a20 = _mm256_fmadd_ps(b, w0, a20), a21 = _mm256_fmadd_ps(b, w1, a21), a22 = _mm256_fmadd_ps(b, w2, a22);
    b = _mm256_broadcast_ss(g3 + i);
    a30 = _mm256_fmadd_ps(b, w0, a30), a31 = _mm256_fmadd_ps(b, w1, a31), a32 = _mm256_fmadd_ps(b, w2, a32);
  }
  _mm256_storeu_ps(d0, a00), _mm256_storeu_ps(d0 + 8, a01), _mm256_storeu_ps(d0 + 16, a02);
  _mm256_storeu_ps(d1, a10), _mm256_storeu_ps(d1 + 8, a11), _mm256_storeu_ps(d1 + 16, a12);
  _mm256_storeu_ps(d2, a20), _mm256_storeu_ps(d2 + 8, a21), _mm256_storeu_ps(d2 + 16, a22);
  _mm256_storeu_ps(d3, a30), _mm256_storeu_ps(d3 + 8, a31), _mm256_storeu_ps(d3 + 16, a32);
}

// The 16-column block (the last slab of a 256-column task), written out for the same reason.
template <>
inline void input_grad_block<4, 2>(const float* G, int64_t ldg, const float* P, int64_t ldp, int64_t nr, float* D,
                                   int64_t ldd) {
  float* d0 = D;
  float* d1 = D + ldd;
  float* d2 = D + 2 * ldd;
  float* d3 = D + 3 * ldd;
  __m256 a00 = _mm256_loadu_ps(d0), a01 = _mm256_loadu_ps(d0 + 8);
  __m256 a10 = _mm256_loadu_ps(d1), a11 = _mm256_loadu_ps(d1 + 8);
  __m256 a20 = _mm256_loadu_ps(d2), a21 = _mm256_loadu_ps(d2 + 8);
  __m256 a30 = _mm256_loadu_ps(d3), a31 = _mm256_loadu_ps(d3 + 8);
  const float* g0 = G;
  const float* g1 = G + ldg;
  const float* g2 = G + 2 * ldg;
  const float* g3 = G + 3 * ldg;
  for (int64_t i = 0; i < nr; ++i, P += ldp) {
    const __m256 w0 = _mm256_loadu_ps(P), w1 = _mm256_loadu_ps(P + 8);
    __m256 b = _mm256_broadcast_ss(g0 + i);
    a00 = _mm256_fmadd_ps(b, w0, a00), a01 = _mm256_fmadd_ps(b, w1, a01);
    b = _mm256_broadcast_ss(g1 + i);
    a10 = _mm256_fmadd_ps(b, w0, a10), a11 = _mm256_fmadd_ps(b, w1, a11);
    b = _mm256_broadcast_ss(g2 + i);
    a20 = _mm256_fmadd_ps(b, w0, a20), a21 = _mm256_fmadd_ps(b, w1, a21);
    b = _mm256_broadcast_ss(g3 + i);
    a30 = _mm256_fmadd_ps(b, w0, a30), a31 = _mm256_fmadd_ps(b, w1, a31);
  }
  _mm256_storeu_ps(d0, a00), _mm256_storeu_ps(d0 + 8, a01);
  _mm256_storeu_ps(d1, a10), _mm256_storeu_ps(d1 + 8, a11);
  _mm256_storeu_ps(d2, a20), _mm256_storeu_ps(d2 + 8, a21);
  _mm256_storeu_ps(d3, a30), _mm256_storeu_ps(d3 + 8, a31);
}

template <int NT, int V>
inline void input_grad_block(const float* G, int64_t ldg, const float* P, int64_t ldp, int64_t nr, float* D,
                             int64_t ldd) {
  __m256 acc[NT][V];
  for (int t = 0; t < NT; ++t)
    for (int v = 0; v < V; ++v) acc[t][v] = _mm256_loadu_ps(D + t * ldd + 8 * v);
  for (int64_t i = 0; i < nr; ++i) {
    __m256 w[V];
    for (int v = 0; v < V; ++v) w[v] = _mm256_loadu_ps(P + i * ldp + 8 * v);
    for (int t = 0; t < NT; ++t) {
      const __m256 a = _mm256_broadcast_ss(G + t * ldg + i);
      for (int v = 0; v < V; ++v) acc[t][v] = _mm256_fmadd_ps(a, w[v], acc[t][v]);
    }
  }
  for (int t = 0; t < NT; ++t)
    for (int v = 0; v < V; ++v) _mm256_storeu_ps(D + t * ldd + 8 * v, acc[t][v]);
}

// One slab of V*8 panel columns for all nt tokens: the slab (nr x V*8 floats) stays in L1
// while the token blocks pass over it.
template <int V>
inline void input_grad_slab(const float* G, int64_t ldg, int64_t nt, const float* P, int64_t ldp, int64_t nr,
                            float* D, int64_t ldd) {
  int64_t t = 0;
  for (; t + 4 <= nt; t += 4) input_grad_block<4, V>(G + t * ldg, ldg, P, ldp, nr, D + t * ldd, ldd);
  for (; t < nt; ++t) input_grad_block<1, V>(G + t * ldg, ldg, P, ldp, nr, D + t * ldd, ldd);
}

// Rows of a slab copied at a time (24 KiB for 24 columns: the copy stays in L1).
constexpr int64_t kSlabCopyRows = 256;

// input_grad_slab on a contiguous copy of the slab's rows. In place, a slab's rows are a
// panel row apart (1 KiB for a 256-column task), so they fall in a few L1 sets, which
// dY and D share. Measured on Zen 3 (2 threads; Q4_0, Q4_K and F16; qwen2.5-0.5b/1.5b and
// llama-3.2-1b q/k/up/down at 128 and 512 tokens): the copy with 128-row panels
// (grad_panel_floats) made the input gradient faster in all 64 cases, by a median 1.10x
// (1.01-1.29x); the copy alone on 64-row panels by a median 1.02x.
template <int V>
inline void input_grad_slab_copied(const float* G, int64_t ldg, int64_t nt, const float* P, int64_t ldp, int64_t nr,
                                   float* D, int64_t ldd) {
  alignas(32) float S[kSlabCopyRows * 8 * V];
  for (int64_t r0 = 0; r0 < nr; r0 += kSlabCopyRows) {
    const int64_t rn = std::min(kSlabCopyRows, nr - r0);
    for (int64_t i = 0; i < rn; ++i)
      for (int v = 0; v < V; ++v) _mm256_store_ps(S + (i * V + v) * 8, _mm256_loadu_ps(P + (r0 + i) * ldp + 8 * v));
    input_grad_slab<V>(G + r0, ldg, nt, S, 8 * V, rn, D, ldd);  // (rows still in increasing order)
  }
}

void input_grad_avx2(const float* G, int64_t ldg, int64_t nt, const float* P, int64_t ldp, int64_t nr, int64_t n,
                     float* D, int64_t ldd) {
  // A remainder of 8 columns (a task of 128) would run the 1-vector kernel (1 load and 4
  // broadcasts per 4 FMAs): the last 32 columns go as two slabs of 16 instead.
  const int64_t n24 = n % 24 == 8 && n >= 32 ? n - 32 : n / 24 * 24;
  int64_t k = 0;
  for (; k < n24; k += 24) input_grad_slab_copied<3>(G, ldg, nt, P + k, ldp, nr, D + k, ldd);
  for (; k + 16 <= n; k += 16) input_grad_slab_copied<2>(G, ldg, nt, P + k, ldp, nr, D + k, ldd);
  for (; k + 8 <= n; k += 8) input_grad_slab<1>(G, ldg, nt, P + k, ldp, nr, D + k, ldd);
  for (; k < n; ++k)  // columns left over when n is not a multiple of 8 (f32/f16 weights)
    for (int64_t t = 0; t < nt; ++t) {
      float s = D[t * ldd + k];
      for (int64_t i = 0; i < nr; ++i) s = std::fma(G[t * ldg + i], P[i * ldp + k], s);  // (as the slabs)
      D[t * ldd + k] = s;
    }
}

// The forward for a block of tokens, as an outer product: Y's rows i are the output
// columns, so a panel of 24 rows transposed to PT[k][24] makes Y[t, i..i+24] += X[t, k] *
// PT[k] the input gradient's kernel (3 loads and 4 broadcasts per 12 FMAs, no horizontal
// sums, each output one FMA chain in column order). On Zen 3 (one thread, operands in L1)
// it reaches 83-100 GFLOP/s of the 90 peak, the dot-product form above 60-83.
constexpr int64_t kSlabRows = 24;
// Columns transposed at a time: 24 KiB of PT, in L1 while the token blocks pass over it.
constexpr int64_t kTransposeCols = 256;

inline void transpose8(__m256 r[8]) {
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  const __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  const __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  const __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  r[0] = _mm256_permute2f128_ps(s0, s4, 0x20), r[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
  r[2] = _mm256_permute2f128_ps(s2, s6, 0x20), r[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
  r[4] = _mm256_permute2f128_ps(s0, s4, 0x31), r[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
  r[6] = _mm256_permute2f128_ps(s2, s6, 0x31), r[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}

// PT[k*kSlabRows + i] = P[i*ldp + k] for i < nr (a multiple of 8, at most kSlabRows), k < n.
void transpose_slab(const float* P, int64_t ldp, int64_t nr, int64_t n, float* PT) {
  for (int64_t i0 = 0; i0 < nr; i0 += 8) {
    const float* p = P + i0 * ldp;
    int64_t k = 0;
    for (; k + 8 <= n; k += 8) {
      __m256 r[8];
      for (int j = 0; j < 8; ++j) r[j] = _mm256_loadu_ps(p + j * ldp + k);
      transpose8(r);
      for (int j = 0; j < 8; ++j) _mm256_storeu_ps(PT + (k + j) * kSlabRows + i0, r[j]);
    }
    for (; k < n; ++k)
      for (int j = 0; j < 8; ++j) PT[k * kSlabRows + i0 + j] = p[j * ldp + k];
  }
}

void forward_avx2(const float* X, int64_t ldx, int64_t nt, const float* P, int64_t ldp, int64_t nr, int64_t n,
                  float* Y, int64_t ldy, bool accumulate) {
  // Used for any number of tokens, so that a row's result does not depend on how the
  // tokens were split (the loss chunks of the output head): for a few tokens the transpose
  // costs more than the products, but the training step's products have dozens or more.
  alignas(32) float PT[kTransposeCols * kSlabRows];
  const int64_t nr8 = nr / 8 * 8;  // rows past a multiple of 8 (untiled types only) take the dot form
  for (int64_t i0 = 0; i0 < nr8; i0 += kSlabRows) {
    const int64_t rb = std::min(kSlabRows, nr8 - i0);
    if (!accumulate)
      for (int64_t t = 0; t < nt; ++t) std::memset(Y + t * ldy + i0, 0, static_cast<size_t>(rb) * sizeof(float));
    for (int64_t k0 = 0; k0 < n; k0 += kTransposeCols) {
      const int64_t kn = std::min(kTransposeCols, n - k0);
      transpose_slab(P + i0 * ldp + k0, ldp, rb, kn, PT);
      switch (rb / 8) {
        case 3: input_grad_slab<3>(X + k0, ldx, nt, PT, kSlabRows, kn, Y + i0, ldy); break;
        case 2: input_grad_slab<2>(X + k0, ldx, nt, PT, kSlabRows, kn, Y + i0, ldy); break;
        default: input_grad_slab<1>(X + k0, ldx, nt, PT, kSlabRows, kn, Y + i0, ldy); break;
      }
    }
  }
  if (nr8 < nr) forward_dot(X, ldx, nt, P + nr8 * ldp, ldp, nr - nr8, n, Y + nr8, ldy, accumulate);
}

}  // namespace
}  // namespace nl::engine

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

namespace nl::engine {

const PanelKernels* avx2_kernels() {
  static const bool cpu_has_it = x86_features().avx2;
  // 256-column input-gradient tasks: measured on Zen 3 (2 threads, f32 and f16 modes, Q4_0,
  // Q4_K, Q6_K and F16, the three presets' gate, k and down at 128 and 512 tokens, 3
  // interleaved runs against 128 columns with 16384-float panels): dX time over the
  // forward's a geometric mean 0.90-0.92x on gate (8960 x 1536, 8192 x 2048, 4864 x 896),
  // 0.96x on down, 0.99-1.00x on k; within 1.15x in 106 of 120 cases against 79.
  static const PanelKernels k{"avx2", dequantize_tiles_avx2, forward_avx2, kTransposeCols, input_grad_avx2,
                              /*grad_panel_floats=*/32768, /*grad_cols_per_task=*/256};
  return cpu_has_it ? &k : nullptr;
}

}  // namespace nl::engine

#else

namespace nl::engine {
const PanelKernels* avx2_kernels() { return nullptr; }
}  // namespace nl::engine

#endif
