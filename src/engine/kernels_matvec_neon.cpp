// The NEON matrix-vector kernels (kernels_matvec.h) for the ARMv8.0 baseline every arm64
// phone core runs: per row and block, widening products (vmull_s8, |w x| <= 128 x 128 fits
// int16) summed pairwise into int32 (vpadalq_s16) and across lanes (vaddvq_s32); then the
// definition's scale step for the group's 8 rows, four lanes at a time. Q4_0 nibbles are
// turned into their values u - 8 as signed bytes first.
//
// K-quant tiles (Q4_K, Q5_K, Q6_K): 8 rows' super-blocks at a time, their scales unpacked once
// per super-block for the 8 rows, then its eight 32-value blocks in order. The quants are
// taken unsigned (u in 0..15, 0..31, 0..63), as the AVX2 kernel takes them, and the offset
// mid x (the activations' sum) is subtracted from each row's integer sum: each product u x
// lies within [-128 umax, 127 umax], so an int16 lane holds more of them before it is
// widened (the bounds at row_sums), and no weight byte needs a subtraction. Up to 4 tokens
// share each block's unpacked quants.
#include "kernels_matvec.h"

#if defined(__aarch64__)
#include <arm_neon.h>

#include <algorithm>
#include <type_traits>
#include <utility>

#include "kernels_int8.h"

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

// ---- K-quants ---------------------------------------------------------------------------

// f(std::integral_constant<int, J>{}) for J = 0 .. N-1: each J's offsets and shift counts
// are immediates.
template <int N, class F>
inline void unrolled(F&& f) {
  [&]<int... J>(std::integer_sequence<int, J...>) {
    (f(std::integral_constant<int, J>{}), ...);
  }(std::make_integer_sequence<int, N>{});
}

// The quants u of 32-value block J (of 8) of one row's K-quant block, unsigned (u[0]:
// columns 0-15, u[1]: 16-31): Q4_K's nibbles (value u - 8), Q5_K's 5 bits (u - 16), Q6_K's
// 6 bits (u - 32); the bits of kernels_int8.h's q5k_quant and q6k_quant.
template <QType kType, int J>
inline void kquant_quants(const uint8_t* block, uint8x16_t u[2]) {
  for (int h = 0; h < 2; ++h) {
    if constexpr (kType == QType::Q6_K) {
      // Low nibbles (quarters 0, 1) or high ones (2, 3) of ql; bits 2 quarter, 2 quarter + 1
      // of qh into bits 4-5, by a shift-and-insert of the nibble, then the top bits cleared.
      constexpr int n = J / 4, quarter = J % 4;
      const uint8x16_t ql = vld1q_u8(block + 64 * n + 32 * (quarter & 1) + 16 * h);
      const uint8x16_t qh = vld1q_u8(block + kQ6KHighBitsOffset + 32 * n + 16 * h);
      uint8x16_t v;
      if constexpr (quarter == 0) v = vsliq_n_u8(ql, qh, 4);
      else if constexpr (quarter == 1) v = vsliq_n_u8(ql, vshrq_n_u8(qh, 2), 4);
      else if constexpr (quarter == 2) v = vsriq_n_u8(qh, ql, 4);
      else v = vsriq_n_u8(vshrq_n_u8(qh, 2), ql, 4);
      u[h] = vandq_u8(v, vdupq_n_u8(0x3F));
    } else {
      constexpr size_t quants = kType == QType::Q5_K ? kQ5KQuantsOffset : kQ4KQuantsOffset;
      const uint8x16_t raw = vld1q_u8(block + quants + 32 * (J / 2) + 16 * h);
      const uint8x16_t nib = J % 2 == 0 ? vandq_u8(raw, vdupq_n_u8(0x0F)) : vshrq_n_u8(raw, 4);
      if constexpr (kType == QType::Q4_K) {
        u[h] = nib;
      } else {  // bit J of qh into bit 4
        const uint8x16_t qh = vld1q_u8(block + kQ5KHighBitsOffset + 16 * h);
        uint8x16_t at4;
        if constexpr (J < 4) at4 = vshlq_n_u8(qh, 4 - J);
        else if constexpr (J == 4) at4 = qh;
        else at4 = vshrq_n_u8(qh, J - 4);
        u[h] = vbslq_u8(vdupq_n_u8(0x10), at4, nib);
      }
    }
  }
}

// Byte K of each 32-bit lane of w, as floats.
template <int K>
inline float32x4_t byte_lanes(uint32x4_t w) {
  if constexpr (K == 3) return vcvtq_f32_u32(vshrq_n_u32(w, 24));
  else if constexpr (K == 0) return vcvtq_f32_u32(vandq_u32(w, vdupq_n_u32(0xFF)));
  else return vcvtq_f32_u32(vandq_u32(vshrq_n_u32(w, 8 * K), vdupq_n_u32(0xFF)));
}

// kquant_block_scales (kernels_int8.h) for the 8 rows of a Q4_K/Q5_K tile, row i's block at
// tile + i * stride: s[j][h] and c[j][h] hold sub-block j's scales and offsets of rows
// 4h..4h+3. The same unpacking per 32-bit word and the same products (exact), so the same
// floats.
inline void kquant_scales8(const uint8_t* tile, size_t stride, float mid, float32x4_t s[8][2], float32x4_t c[8][2]) {
  const uint32x4_t six = vdupq_n_u32(0x3f3f3f3f), four = vdupq_n_u32(0x0f0f0f0f), top = vdupq_n_u32(0x30303030);
  const auto u64 = [](uint32x4_t v) { return vreinterpretq_u64_u32(v); };
  const auto u32 = [](uint64x2_t v) { return vreinterpretq_u32_u64(v); };
  for (int h = 0; h < 2; ++h) {
    // The 4 rows' first 16 bytes (d | dmin << 16, then 3 words of scales and mins)
    // transposed: dm, w1, w2 and w3 hold words 0-3 of the 4 rows.
    uint32x4_t r[4];
    for (int i = 0; i < 4; ++i) r[i] = vreinterpretq_u32_u8(vld1q_u8(tile + (4 * h + i) * stride));
    const uint32x4_t t0 = vtrn1q_u32(r[0], r[1]), t1 = vtrn2q_u32(r[0], r[1]);
    const uint32x4_t t2 = vtrn1q_u32(r[2], r[3]), t3 = vtrn2q_u32(r[2], r[3]);
    const uint32x4_t dm = u32(vtrn1q_u64(u64(t0), u64(t2))), w1 = u32(vtrn1q_u64(u64(t1), u64(t3)));
    const uint32x4_t w2 = u32(vtrn2q_u64(u64(t0), u64(t2))), w3 = u32(vtrn2q_u64(u64(t1), u64(t3)));
    const float32x4_t dd = vcvt_f32_f16(vreinterpret_f16_u16(vmovn_u32(dm)));
    const float32x4_t dmin = vcvt_f32_f16(vreinterpret_f16_u16(vshrn_n_u32(dm, 16)));
    // unpack_scale_min_k4 per word, as kquant_block_scales: byte k of sc[0] / sc[1] is
    // sub-block k's / k + 4's scale, the same for the mins.
    const uint32x4_t sc[2] = {vandq_u32(w1, six), vorrq_u32(vandq_u32(w3, four), vandq_u32(vshrq_n_u32(w1, 2), top))};
    const uint32x4_t mn[2] = {vandq_u32(w2, six),
                              vorrq_u32(vandq_u32(vshrq_n_u32(w3, 4), four), vandq_u32(vshrq_n_u32(w2, 2), top))};
    unrolled<8>([&](auto J) {
      constexpr int j = J;
      s[j][h] = vmulq_f32(dd, byte_lanes<j % 4>(sc[j / 4]));
      c[j][h] = vsubq_f32(vmulq_n_f32(s[j][h], mid), vmulq_f32(dmin, byte_lanes<j % 4>(mn[j / 4])));
    });
  }
}

// The Q6_K scales of the 8 rows of a tile, row i's block at tile + i * stride: sc[k][h]
// holds sub-block k's integer scales of rows 4h..4h+3 (sign-extended to int32), d[h] their
// d. A table lookup puts row i's byte k at the top of lane i, an arithmetic shift brings it
// down with its sign.
inline void q6k_scales8(const uint8_t* tile, size_t stride, int32x4_t sc[16][2], float32x4_t d[2]) {
  for (int h = 0; h < 2; ++h) {
    uint8x16x4_t rows;
    uint16x4_t dh = vdup_n_u16(0);
    unrolled<4>([&](auto I) {
      const uint8_t* block = tile + (4 * h + I) * stride;
      rows.val[I] = vld1q_u8(block + kQ6KScalesOffset);
      dh = vld1_lane_u16(reinterpret_cast<const uint16_t*>(block + kQ6KScaleOffset), dh, I);
    });
    d[h] = vcvt_f32_f16(vreinterpret_f16_u16(dh));
    // Byte 3 of lane i from table byte 16 i + k; the others out of range (0).
    uint8x16_t at = {0x80, 0x80, 0x80, 0, 0x80, 0x80, 0x80, 16, 0x80, 0x80, 0x80, 32, 0x80, 0x80, 0x80, 48};
    for (int k = 0; k < 16; ++k, at = vaddq_u8(at, vdupq_n_u8(1)))
      sc[k][h] = vshrq_n_s32(vreinterpretq_s32_u8(vqtbl4q_u8(rows, at)), 24);
  }
}

// The products of 16 unsigned quants u (at most 63, so signed bytes too) with 16 activations
// x, two per int16 lane (columns k and k + 8); mla16 adds them to a.
inline int16x8_t mul16(uint8x16_t u, int8x16_t x) {
  const int8x16_t w = vreinterpretq_s8_u8(u);
  return vmlal_high_s8(vmull_s8(vget_low_s8(w), vget_low_s8(x)), w, x);
}
inline int16x8_t mla16(int16x8_t a, uint8x16_t u, int8x16_t x) {
  const int8x16_t w = vreinterpretq_s8_u8(u);
  return vmlal_high_s8(vmlal_s8(a, vget_low_s8(w), vget_low_s8(x)), w, x);
}

// The sums of 8 rows' int16 lanes (p[i]: row i's) as int32, rows 0-3 in out[0] and 4-7 in
// out[1]: kLevels16 levels of pairwise adds in int16 (1: a row's 8 lanes to 4; 2: to 2),
// then widened. With P products of unsigned quants u <= umax per input lane and |x| <= 128,
// a lane holds at most 2^kLevels16 P umax 128 there, which the callers keep within int16:
// Q4_K 4 x 4 x 15 x 128 = 30720, Q5_K 2 x 4 x 31 x 128 = 31744, Q6_K 2 x 2 x 63 x 128 = 32256.
template <int kLevels16>
inline void row_sums(const int16x8_t p[8], int32x4_t out[2]) {
  for (int h = 0; h < 2; ++h) {
    const int16x8_t a = vpaddq_s16(p[4 * h], p[4 * h + 1]), b = vpaddq_s16(p[4 * h + 2], p[4 * h + 3]);
    if constexpr (kLevels16 == 2) out[h] = vpaddlq_s16(vpaddq_s16(a, b));
    else out[h] = vpaddq_s32(vpaddlq_s16(a), vpaddlq_s16(b));
  }
}

// One super-block's scales for the 8 rows of a row group, [h] holding rows 4h..4h+3: Q4_K /
// Q5_K's scales s and offsets c per 32-value block (kquant_scales8); Q6_K's d in s[0] and
// integer scales sc per 16 values (q6k_scales8).
struct SuperBlockScales {
  float32x4_t s[8][2], c[8][2];
  int32x4_t sc[16][2];
};

// NT tokens' activations from a super-block's first 32-value block on: token t's quants at
// q + t * 32 * nb, its scale, quant sum and offset factor (Q4_K/Q5_K) at [t * nb].
struct TokenBlocks {
  const int8_t* q;
  const float* d;
  const int32_t* sum;
  const float* z;
  int64_t nb;
};

// Block J (32 values) of a super-block, 8 rows (row i's block at rows[i]) and NT tokens: each
// row's unsigned quants (kquant_quants) times the activations, the rows' sums (row_sums) less
// the unsigned quants' offset, so isum is the definition's exact integer: Q4_K, Q5_K: mid x
// the block's activation sum (8, 16; the quantizer's sum); Q6_K: 32 x each half's sum before
// the half's integer scale multiplies it (|sum - 32 sx| <= 16 x 32 x 128, times |sc| <= 128:
// far within int32). Then the definition's chain, lane by lane: acc = fma(float(isum),
// s * dx, acc).
template <int NT, QType kType, int J>
inline void kquant_block(const uint8_t* const rows[8], const TokenBlocks& tk, const SuperBlockScales& sc,
                         float32x4_t acc[NT][2]) {
  constexpr bool kQ6 = kType == QType::Q6_K;
  constexpr int32_t kMid = kType == QType::Q4_K ? 8 : kType == QType::Q5_K ? 16 : 32;
  uint8x16_t u[8][2];
  for (int i = 0; i < 8; ++i) kquant_quants<kType, J>(rows[i], u[i]);
  for (int t = 0; t < NT; ++t) {
    const int64_t b = t * tk.nb + J;
    const int8x16_t x0 = vld1q_s8(tk.q + 32 * b), x1 = vld1q_s8(tk.q + 32 * b + 16);
    int32x4_t isum[2];
    if constexpr (kQ6) {
      int16x8_t p0[8], p1[8];
      for (int i = 0; i < 8; ++i) p0[i] = mul16(u[i][0], x0), p1[i] = mul16(u[i][1], x1);
      int32x4_t s0[2], s1[2];
      row_sums<1>(p0, s0);
      row_sums<1>(p1, s1);
      const int32_t sx0 = vaddlvq_s8(x0);  // (the second half's: the block's sum less this)
      const int32x4_t o0 = vdupq_n_s32(kMid * sx0), o1 = vdupq_n_s32(kMid * (tk.sum[b] - sx0));
      for (int h = 0; h < 2; ++h)
        isum[h] = vmlaq_s32(vmulq_s32(vsubq_s32(s0[h], o0), sc.sc[2 * J][h]), vsubq_s32(s1[h], o1),
                            sc.sc[2 * J + 1][h]);
    } else {
      int16x8_t p[8];
      for (int i = 0; i < 8; ++i) p[i] = mla16(mul16(u[i][0], x0), u[i][1], x1);
      int32x4_t r[2];
      row_sums<kType == QType::Q4_K ? 2 : 1>(p, r);
      for (int h = 0; h < 2; ++h) isum[h] = vsubq_s32(r[h], vdupq_n_s32(kMid * tk.sum[b]));
    }
    for (int h = 0; h < 2; ++h)
      acc[t][h] = vfmaq_f32(acc[t][h], vcvtq_f32_s32(isum[h]), vmulq_n_f32(sc.s[kQ6 ? 0 : J][h], tk.d[b]));
  }
  // Keeps GCC from interleaving the 8 unrolled blocks: it hoisted all their loads and
  // spilled (Q4_K, Q5_K, Q6_K: 1.5x, 1.4x, 1.6x the instructions at one token under
  // qemu-aarch64 -cpu cortex-a53).
  asm volatile("" ::: "memory");
}

// The 8 blocks of a super-block in order.
template <int NT, QType kType, int... J>
inline void kquant_blocks(std::integer_sequence<int, J...>, const uint8_t* const rows[8], const TokenBlocks& tk,
                          const SuperBlockScales& sc, float32x4_t acc[NT][2]) {
  (kquant_block<NT, kType, J>(rows, tk, sc, acc), ...);
}

// A K-quant row group (8 rows), NT tokens: per super-block the rows' scales, its 8 blocks in
// order (kquant_block), then Q4_K/Q5_K's offsets, corr = fma(c, z, corr) over the same
// blocks: a second chain, added at the end. (After the blocks, not inside them: there its
// registers made 4 tokens spill, 1.2-1.3x the instructions.)
template <int NT, QType kType>
void kquant_group(const TiledMatrix& m, int64_t g, const int8_t* q, const float* d, const int32_t* sum,
                  const float* z, float* Y, int64_t ldy) {
  constexpr bool kQ6 = kType == QType::Q6_K;
  const int64_t nsb = m.n_blocks(), nb = m.cols / 32;
  const size_t stride = m.block_bytes;
  float32x4_t acc[NT][2], corr[NT][2];
  for (int t = 0; t < NT; ++t)
    for (int h = 0; h < 2; ++h) acc[t][h] = corr[t][h] = vdupq_n_f32(0.0f);
  for (int64_t sb = 0; sb < nsb; ++sb) {
    const uint8_t* tile = m.tile(g, sb);
    SuperBlockScales sc;
    if constexpr (kQ6) q6k_scales8(tile, stride, sc.sc, sc.s[0]);
    else kquant_scales8(tile, stride, kType == QType::Q5_K ? 16.0f : 8.0f, sc.s, sc.c);
    const uint8_t* rows[8];
    for (int i = 0; i < 8; ++i) rows[i] = tile + i * stride;
    const int64_t b = sb * 8;
    const TokenBlocks tk{q + 32 * b, d + b, sum + b, kQ6 ? nullptr : z + b, nb};
    kquant_blocks<NT, kType>(std::make_integer_sequence<int, 8>{}, rows, tk, sc, acc);
    if constexpr (!kQ6)
      for (int t = 0; t < NT; ++t)
        for (int j = 0; j < 8; ++j)
          for (int h = 0; h < 2; ++h) corr[t][h] = vfmaq_n_f32(corr[t][h], sc.c[j][h], tk.z[t * nb + j]);
  }
  for (int t = 0; t < NT; ++t)
    for (int h = 0; h < 2; ++h)
      vst1q_f32(Y + t * ldy + g * 8 + 4 * h, kQ6 ? acc[t][h] : vaddq_f32(acc[t][h], corr[t][h]));
}

// A K-quant row group for nt tokens, up to 4 at a time.
template <QType kType>
void kquant_tokens(const TiledMatrix& m, int64_t g, const int8_t* q, const float* d, const int32_t* sum,
                   const float* z, int64_t nt, float* Y, int64_t ldy) {
  const int64_t nb = m.cols / 32;
  for (int64_t t = 0; t < nt; t += 4) {
    const int64_t o = t * nb;
    const int8_t* qt = q + o * 32;
    const float* zt = z ? z + o : nullptr;  // (Q6_K: none)
    switch (std::min<int64_t>(4, nt - t)) {
      case 4: kquant_group<4, kType>(m, g, qt, d + o, sum + o, zt, Y + t * ldy, ldy); break;
      case 3: kquant_group<3, kType>(m, g, qt, d + o, sum + o, zt, Y + t * ldy, ldy); break;
      case 2: kquant_group<2, kType>(m, g, qt, d + o, sum + o, zt, Y + t * ldy, ldy); break;
      default: kquant_group<1, kType>(m, g, qt, d + o, sum + o, zt, Y + t * ldy, ldy); break;
    }
  }
}

void int8_tiles_neon(const TiledMatrix& m, int64_t g0, int64_t g1, const int8_t* q, const float* d,
                     const int32_t* sum, const float* z, int64_t nt, float* Y, int64_t ldy) {
  for (int64_t g = g0; g < g1; ++g) {
    if (m.group_rows(g) < 8) {  // a partial last group: its tiles hold fewer rows
      matvec_int8_group_scalar(m, g, q, d, z, nt, Y, ldy);
      continue;
    }
    switch (m.type) {
      case QType::Q4_K: kquant_tokens<QType::Q4_K>(m, g, q, d, sum, z, nt, Y, ldy); break;
      case QType::Q5_K: kquant_tokens<QType::Q5_K>(m, g, q, d, sum, z, nt, Y, ldy); break;
      case QType::Q6_K: kquant_tokens<QType::Q6_K>(m, g, q, d, sum, z, nt, Y, ldy); break;
      default: full_group(m, g, q, d, nt, Y, ldy); break;
    }
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
