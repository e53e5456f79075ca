// NEON panel kernels for arm64 (phones). Advanced SIMD is part of every AArch64 CPU, so
// dispatch.cpp hands these out on any arm64 machine; on other machines this file compiles
// to the "not available" answer only.
//
// Register blocking (32 q registers of 4 floats): forward keeps 4 rows x 4 tokens of
// 4-lane partial dot products in 16 registers (8 loads per 16 FMAs); input grad keeps 4
// tokens x 16 columns of dX in 16 registers while a tall panel streams through them
// (4 loads + 4 scalars per 16 FMAs), in increasing row order as the reference.
#include "kernels.h"

#if defined(__aarch64__)
#include <arm_neon.h>

#include <cmath>
#include <cstring>

#include "../quant/blocks.h"
#include "nightlora/util/half.h"

namespace nl::engine {
namespace {

inline float half_at(const uint8_t* p) {
  uint16_t bits;
  std::memcpy(&bits, p, 2);
  return fp16_to_f32(bits);
}

// 8 signed bytes -> 2 x 4 floats times d (one rounded multiply each, as the reference).
inline void store_scaled_i8x8(int8x8_t q, float d, float* y) {
  const int16x8_t w = vmovl_s8(q);
  vst1q_f32(y, vmulq_n_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(w))), d));
  vst1q_f32(y + 4, vmulq_n_f32(vcvtq_f32_s32(vmovl_s16(vget_high_s16(w))), d));
}

void dequantize_legacy_row(const TiledMatrix& m, const uint8_t* t, int64_t nr, int64_t i, float* y) {
  const size_t quant_bytes = m.block_bytes - sizeof(uint16_t);
  const float d = half_at(t + i * 2);
  const uint8_t* q = t + static_cast<size_t>(nr) * sizeof(uint16_t) + static_cast<size_t>(i) * quant_bytes;
  int8x16_t lo, hi;  // elements 0..15 and 16..31
  if (m.type == QType::Q4_0) {
    const uint8x16_t raw = vld1q_u8(q);
    const int8x16_t eight = vdupq_n_s8(8);
    lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(raw, vdupq_n_u8(0x0F))), eight);
    hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(raw, 4)), eight);
  } else {
    lo = vld1q_s8(reinterpret_cast<const int8_t*>(q));
    hi = vld1q_s8(reinterpret_cast<const int8_t*>(q + 16));
  }
  store_scaled_i8x8(vget_low_s8(lo), d, y);
  store_scaled_i8x8(vget_high_s8(lo), d, y + 8);
  store_scaled_i8x8(vget_low_s8(hi), d, y + 16);
  store_scaled_i8x8(vget_high_s8(hi), d, y + 24);
}

// 16 unsigned 4-bit levels -> d1 * q - m1. GCC contracts the reference's `d1 * q - m1`
// into one fused multiply-subtract on AArch64 (FMA is baseline, -ffp-contract=fast is the
// default), so this does the same: fma(d1, q, -m1), one rounding.
inline void store_q4k_x16(uint8x16_t q, float d1, float m1, float* y) {
  const float32x4_t d = vdupq_n_f32(d1), neg_m = vdupq_n_f32(-m1);
  const uint16x8_t lo = vmovl_u8(vget_low_u8(q)), hi = vmovl_u8(vget_high_u8(q));
  vst1q_f32(y + 0, vfmaq_f32(neg_m, d, vcvtq_f32_u32(vmovl_u16(vget_low_u16(lo)))));
  vst1q_f32(y + 4, vfmaq_f32(neg_m, d, vcvtq_f32_u32(vmovl_u16(vget_high_u16(lo)))));
  vst1q_f32(y + 8, vfmaq_f32(neg_m, d, vcvtq_f32_u32(vmovl_u16(vget_low_u16(hi)))));
  vst1q_f32(y + 12, vfmaq_f32(neg_m, d, vcvtq_f32_u32(vmovl_u16(vget_high_u16(hi)))));
}

void dequantize_q4k_half(const quant::BlockQ4_K* x, int h, float* y) {
  const float d = half_at(reinterpret_cast<const uint8_t*>(&x->d));
  const float dmin = half_at(reinterpret_cast<const uint8_t*>(&x->dmin));
  for (int g = 2 * h; g < 2 * h + 2; ++g, y += 64) {  // the half's two groups of 64
    const quant::KGroupScales k = quant::kquant_group_scales(x->scales, d, dmin, g);
    for (int half = 0; half < 2; ++half) {
      const uint8x16_t raw = vld1q_u8(x->qs + 32 * g + 16 * half);
      store_q4k_x16(vandq_u8(raw, vdupq_n_u8(0x0F)), k.scale1, k.min1, y + 16 * half);
      store_q4k_x16(vshrq_n_u8(raw, 4), k.scale2, k.min2, y + 32 + 16 * half);
    }
  }
}

// Q5_K, half h: Q4_K's nibbles with a fifth bit from qh (bit 2g of qh[l] for group g's low
// nibbles, bit 2g+1 for its high ones; quant::dequantize_row_q5_K), then Q4_K's fma.
void dequantize_q5k_half(const quant::BlockQ5_K* x, int h, float* y) {
  const float d = half_at(reinterpret_cast<const uint8_t*>(&x->d));
  const float dmin = half_at(reinterpret_cast<const uint8_t*>(&x->dmin));
  const uint8x16_t low_nibbles = vdupq_n_u8(0x0F), one = vdupq_n_u8(1);
  for (int g = 2 * h; g < 2 * h + 2; ++g, y += 64) {  // the half's two groups of 64
    const quant::KGroupScales k = quant::kquant_group_scales(x->scales, d, dmin, g);
    // vshlq_u8 by a negative count shifts right: qh's bit 2g (2g+1) to bit 0.
    const int8x16_t to_bit_lo = vdupq_n_s8(static_cast<int8_t>(-2 * g));
    const int8x16_t to_bit_hi = vdupq_n_s8(static_cast<int8_t>(-2 * g - 1));
    for (int half = 0; half < 2; ++half) {
      const uint8x16_t raw = vld1q_u8(x->qs + 32 * g + 16 * half);
      const uint8x16_t qh = vld1q_u8(x->qh + 16 * half);
      const uint8x16_t bit_lo = vshlq_n_u8(vandq_u8(vshlq_u8(qh, to_bit_lo), one), 4);
      const uint8x16_t bit_hi = vshlq_n_u8(vandq_u8(vshlq_u8(qh, to_bit_hi), one), 4);
      store_q4k_x16(vorrq_u8(vandq_u8(raw, low_nibbles), bit_lo), k.scale1, k.min1, y + 16 * half);
      store_q4k_x16(vorrq_u8(vshrq_n_u8(raw, 4), bit_hi), k.scale2, k.min2, y + 32 + 16 * half);
    }
  }
}

// Q6_K, half h (128 values): 16 levels at a time from ql/qh (see quant::dequantize_row_q6_K), minus 32, times
// the float d * sc, the reference's two rounded multiplies.
void dequantize_q6k_half(const quant::BlockQ6_K* x, int h, float* y) {
  const float d = half_at(reinterpret_cast<const uint8_t*>(&x->d));
  const uint8x16_t low_nibbles = vdupq_n_u8(0x0F), high_pair = vdupq_n_u8(0x30);
  const int8x16_t thirty_two = vdupq_n_s8(32);
  {  // the half's 128 values
    const uint8_t* ql = x->ql + 64 * h;
    const int8_t* sc = x->scales + 8 * h;
    for (int part = 0; part < 2; ++part) {  // l in [16*part, 16*part + 16)
      const int l = 16 * part;
      const uint8x16_t ql0 = vld1q_u8(ql + l), ql1 = vld1q_u8(ql + 32 + l);
      const uint8x16_t qh = vld1q_u8(x->qh + 32 * h + l);
      const uint8x16_t q[4] = {
          vorrq_u8(vandq_u8(ql0, low_nibbles), vandq_u8(vshlq_n_u8(qh, 4), high_pair)),
          vorrq_u8(vandq_u8(ql1, low_nibbles), vandq_u8(vshlq_n_u8(qh, 2), high_pair)),
          vorrq_u8(vshrq_n_u8(ql0, 4), vandq_u8(qh, high_pair)),
          vorrq_u8(vshrq_n_u8(ql1, 4), vandq_u8(vshrq_n_u8(qh, 2), high_pair)),
      };
      for (int k = 0; k < 4; ++k) {  // elements 32k + l .. 32k + l + 15, sub-block 2k + part
        const int8x16_t s = vsubq_s8(vreinterpretq_s8_u8(q[k]), thirty_two);
        const float scale = d * sc[2 * k + part];
        store_scaled_i8x8(vget_low_s8(s), scale, y + 32 * k + l);
        store_scaled_i8x8(vget_high_s8(s), scale, y + 32 * k + l + 8);
      }
    }
  }
}

void dequantize_tiles_neon(const TiledMatrix& m, int64_t g, int64_t c0, int64_t c1, float* panel, int64_t ld) {
  if (!has_tiled_layout(m.type)) return dequantize_tiles_scalar(m, g, c0, c1, panel, ld);  // its error
  const int64_t nr = m.group_rows(g);
  for_each_unit_row(m, g, c0, c1, panel, ld, [&](const uint8_t* t, int64_t i, int half, float* y) {
    const uint8_t* block = t + static_cast<size_t>(i) * m.block_bytes;  // K-quants, F16
    switch (m.type) {
      case QType::Q4_0:
      case QType::Q8_0: dequantize_legacy_row(m, t, nr, i, y); break;
      case QType::Q4_K: dequantize_q4k_half(reinterpret_cast<const quant::BlockQ4_K*>(block), half, y); break;
      case QType::Q6_K: dequantize_q6k_half(reinterpret_cast<const quant::BlockQ6_K*>(block), half, y); break;
      case QType::Q5_K: dequantize_q5k_half(reinterpret_cast<const quant::BlockQ5_K*>(block), half, y); break;
      case QType::F16:  // exact widening conversion, subnormals included
        for (int j = 0; j < kTileCols; j += 4) {
          uint16_t h[4];
          std::memcpy(h, block + 2 * j, sizeof h);
          vst1q_f32(y + j, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(h))));
        }
        break;
      default: break;  // not a tiled type: excluded above
    }
  });
}

// R rows x NT tokens of Y, each a dot product over n columns (a multiple of 4: the
// columns past the last whole vector are forward_neon's). With a loop for those columns in
// this function's epilogue (inline or called), GCC 12 kept the 16 accumulators in memory
// and stored them on every iteration of the main loop (8 stores per 16 FMAs).
template <int R, int NT>
inline void forward_block(const float* X, int64_t ldx, const float* P, int64_t ldp, int64_t n, float* Y, int64_t ldy,
                          bool accumulate) {
  float32x4_t acc[NT][R];
  for (int t = 0; t < NT; ++t)
    for (int r = 0; r < R; ++r) acc[t][r] = vdupq_n_f32(0.0f);
  for (int64_t k = 0; k < n; k += 4) {
    float32x4_t w[R];
    for (int r = 0; r < R; ++r) w[r] = vld1q_f32(P + r * ldp + k);
    for (int t = 0; t < NT; ++t) {
      const float32x4_t x = vld1q_f32(X + t * ldx + k);
      for (int r = 0; r < R; ++r) acc[t][r] = vfmaq_f32(acc[t][r], x, w[r]);
    }
  }
  for (int t = 0; t < NT; ++t)
    for (int r = 0; r < R; ++r) {
      const float s = vaddvq_f32(acc[t][r]);
      Y[t * ldy + r] = accumulate ? Y[t * ldy + r] + s : s;
    }
}

template <int R>
inline void forward_rows(const float* X, int64_t ldx, int64_t nt, const float* P, int64_t ldp, int64_t n, float* Y,
                         int64_t ldy, bool accumulate) {
  int64_t t = 0;
  for (; t + 4 <= nt; t += 4) forward_block<R, 4>(X + t * ldx, ldx, P, ldp, n, Y + t * ldy, ldy, accumulate);
  for (; t < nt; ++t) forward_block<R, 1>(X + t * ldx, ldx, P, ldp, n, Y + t * ldy, ldy, accumulate);
}

void forward_neon(const float* X, int64_t ldx, int64_t nt, const float* P, int64_t ldp, int64_t nr, int64_t n,
                  float* Y, int64_t ldy, bool accumulate) {
  const int64_t n4 = n & ~int64_t{3};
  int64_t i = 0;
  for (; i + 4 <= nr; i += 4) forward_rows<4>(X, ldx, nt, P + i * ldp, ldp, n4, Y + i, ldy, accumulate);
  for (; i < nr; ++i) forward_rows<1>(X, ldx, nt, P + i * ldp, ldp, n4, Y + i, ldy, accumulate);
  if (n4 < n)  // the last 1-3 columns, added in order
    for (int64_t t = 0; t < nt; ++t)
      for (i = 0; i < nr; ++i) {
        float s = Y[t * ldy + i];
        for (int64_t j = n4; j < n; ++j) s += X[t * ldx + j] * P[i * ldp + j];
        Y[t * ldy + i] = s;
      }
}

// NT tokens x (V vectors of 4 columns) of D in registers over the nr panel rows.
template <int NT, int V>
inline void input_grad_block(const float* G, int64_t ldg, const float* P, int64_t ldp, int64_t nr, float* D,
                             int64_t ldd) {
  float32x4_t acc[NT][V];
  for (int t = 0; t < NT; ++t)
    for (int v = 0; v < V; ++v) acc[t][v] = vld1q_f32(D + t * ldd + 4 * v);
  for (int64_t i = 0; i < nr; ++i) {
    float32x4_t w[V];
    for (int v = 0; v < V; ++v) w[v] = vld1q_f32(P + i * ldp + 4 * v);
    for (int t = 0; t < NT; ++t) {
      const float a = G[t * ldg + i];
      for (int v = 0; v < V; ++v) acc[t][v] = vfmaq_n_f32(acc[t][v], w[v], a);
    }
  }
  for (int t = 0; t < NT; ++t)
    for (int v = 0; v < V; ++v) vst1q_f32(D + t * ldd + 4 * v, acc[t][v]);
}

// One slab of V*4 panel columns for all nt tokens (the slab stays in L1 meanwhile).
template <int V>
inline void input_grad_slab(const float* G, int64_t ldg, int64_t nt, const float* P, int64_t ldp, int64_t nr,
                            float* D, int64_t ldd) {
  int64_t t = 0;
  for (; t + 4 <= nt; t += 4) input_grad_block<4, V>(G + t * ldg, ldg, P, ldp, nr, D + t * ldd, ldd);
  for (; t < nt; ++t) input_grad_block<1, V>(G + t * ldg, ldg, P, ldp, nr, D + t * ldd, ldd);
}

void input_grad_neon(const float* G, int64_t ldg, int64_t nt, const float* P, int64_t ldp, int64_t nr, int64_t n,
                     float* D, int64_t ldd) {
  int64_t k = 0;
  for (; k + 16 <= n; k += 16) input_grad_slab<4>(G, ldg, nt, P + k, ldp, nr, D + k, ldd);
  for (; k + 4 <= n; k += 4) input_grad_slab<1>(G, ldg, nt, P + k, ldp, nr, D + k, ldd);
  for (; k < n; ++k)  // columns left over when n is not a multiple of 4
    for (int64_t t = 0; t < nt; ++t) {
      float s = D[t * ldd + k];
      for (int64_t i = 0; i < nr; ++i) s = std::fma(G[t * ldg + i], P[i * ldp + k], s);  // (as the slabs)
      D[t * ldd + k] = s;
    }
}

}  // namespace

const PanelKernels* neon_kernels() {
  static const PanelKernels k{"neon", dequantize_tiles_neon, forward_neon, /*forward_chunk_cols=*/0,
                                input_grad_neon, /*grad_panel_floats=*/8192,
                                /*grad_cols_per_task=*/128};
  return &k;
}

}  // namespace nl::engine

#else

namespace nl::engine {
const PanelKernels* neon_kernels() { return nullptr; }
}  // namespace nl::engine

#endif
