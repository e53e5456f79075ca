// The NEON matrix-vector kernels (kernels_matvec.h) for the ARMv8.0 baseline every arm64
// phone core runs: per row and block, widening products (vmull_s8, |w x| <= 128 x 128 fits
// int16) summed pairwise into int32 (vpadalq_s16) and across lanes (vaddvq_s32); then the
// definition's scale step for the group's 8 rows, four lanes at a time. Q4_0 nibbles are
// turned into their values u - 8 as signed bytes first.
#include "kernels_matvec.h"

#if defined(__aarch64__)
#include <arm_neon.h>

namespace nl::engine {
namespace {

// The integer dot product of one row's 32 weights (lo: columns 0-15, hi: 16-31) with x.
inline int32_t dot32(int8x16_t lo, int8x16_t hi, int8x16_t x0, int8x16_t x1) {
  int32x4_t a = vdupq_n_s32(0);
  a = vpadalq_s16(a, vmull_s8(vget_low_s8(lo), vget_low_s8(x0)));
  a = vpadalq_s16(a, vmull_high_s8(lo, x0));
  a = vpadalq_s16(a, vmull_s8(vget_low_s8(hi), vget_low_s8(x1)));
  a = vpadalq_s16(a, vmull_high_s8(hi, x1));
  return vaddvq_s32(a);
}

void full_group(const TiledMatrix& m, int64_t g, const int8_t* q, const float* d, int64_t nt, float* Y, int64_t ldy) {
  const int64_t nb = m.n_blocks();
  const bool q4 = m.type == QType::Q4_0;
  const size_t tile_bytes = 8 * m.block_bytes;
  for (int64_t t = 0; t < nt; ++t) {
    float32x4_t acc0 = vdupq_n_f32(0.0f), acc1 = vdupq_n_f32(0.0f);
    const uint8_t* tile = m.tile(g, 0);  // a full group's tiles follow one another
    for (int64_t b = 0; b < nb; ++b, tile += tile_bytes) {
      const int8_t* x = q + (t * nb + b) * 32;
      const int8x16_t x0 = vld1q_s8(x), x1 = vld1q_s8(x + 16);
      int32_t isum[8];
      for (int i = 0; i < 8; ++i) {
        if (q4) {
          const uint8x16_t v = vld1q_u8(tile + 16 + 16 * i);
          const int8x16_t lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(v, vdupq_n_u8(0x0F))), vdupq_n_s8(8));
          const int8x16_t hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(v, 4)), vdupq_n_s8(8));
          isum[i] = dot32(lo, hi, x0, x1);
        } else {
          const int8_t* w = reinterpret_cast<const int8_t*>(tile + 16 + 32 * i);
          isum[i] = dot32(vld1q_s8(w), vld1q_s8(w + 16), x0, x1);
        }
      }
      const float16x8_t h = vreinterpretq_f16_u16(vld1q_u16(reinterpret_cast<const uint16_t*>(tile)));
      const float32x4_t dx = vdupq_n_f32(d[t * nb + b]);
      acc0 = vfmaq_f32(acc0, vcvtq_f32_s32(vld1q_s32(isum)), vmulq_f32(vcvt_f32_f16(vget_low_f16(h)), dx));
      acc1 = vfmaq_f32(acc1, vcvtq_f32_s32(vld1q_s32(isum + 4)), vmulq_f32(vcvt_high_f32_f16(h), dx));
    }
    vst1q_f32(Y + t * ldy + g * 8, acc0);
    vst1q_f32(Y + t * ldy + g * 8 + 4, acc1);
  }
}

void int8_tiles_neon(const TiledMatrix& m, int64_t g0, int64_t g1, const int8_t* q, const float* d, const int32_t*,
                     const float*, int64_t nt, float* Y, int64_t ldy) {
  for (int64_t g = g0; g < g1; ++g) {
    if (m.group_rows(g) < 8) matvec_int8_group_scalar(m, g, q, d, nullptr, nt, Y, ldy);
    else full_group(m, g, q, d, nt, Y, ldy);
  }
}

}  // namespace

const MatvecKernels* matvec_kernels_neon() {
  static const MatvecKernels k{"neon", int8_tiles_neon, nullptr};
  return &k;
}

}  // namespace nl::engine

#else

namespace nl::engine {
const MatvecKernels* matvec_kernels_neon() { return nullptr; }
}  // namespace nl::engine

#endif
