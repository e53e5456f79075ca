// The NEON int8 kernels (layouts and arithmetic: kernels_int8.h), compiled twice: by
// kernels_int8_neon.cpp for the arm64 baseline (ARMv8.0, every phone core), whose dot
// products are vmull_s8 + vpadalq_s16 (widening multiply, pairwise accumulate; for Q4_0
// panels vmlal_s8, int16 sums widened once per block), and by
// kernels_int8_neon_dotprod.cpp for ARMv8.2 with the dot-product extension
// (NL_INT8_DOTPROD = 1): sdot (vdotq_laneq_s32) multiplies a 4-byte chunk of the
// activations, selected by lane, with 4 bytes of 4 panel lanes and adds into 4 int32. The
// including file sets the target pragma; everything here has internal linkage, so each
// compilation is its own set. Both read the same panels and give the same integers.
// Signed6 (Q6_K) panels keep each half block's sums apart until they are multiplied by the
// rows' integer scales (dot_tokens_q6k), and their input gradient requantizes dY per half
// (GradPanel::parts).
//
// In forward panels Q4_0 nibbles (0..15) are valid signed bytes, so the nibble offset is the
// same "- 8 * sum q" as on AVX2; input-gradient panels hold the values u - 8 (signed), which
// need no offset. As on AVX2, the products go 4 tokens at a time, so each weight chunk is
// loaded once per 4 tokens. The tile packers are AVX2's in NEON: 4x4 dword transposes of a
// tile's rows (forward) or four rows' bytes interleaved with vst4 (input grad), the type
// decided at compile time.
#pragma once
#include <arm_neon.h>

#include <algorithm>
#include <cstring>

#include "kernels_int8.h"

#ifndef NL_INT8_DOTPROD
#error "define NL_INT8_DOTPROD (0 or 1) and the target pragma before including kernels_int8_neon_body.h"
#endif

namespace nl::engine {
namespace {

// max |v| of 4N values: exact in any order, and vmaxnm drops a NaN as std::max(m, NaN)
// does in the scalar definitions.
template <int N = 8>
inline float max_abs(const float32x4_t v[N]) {
  float32x4_t m = vdupq_n_f32(0.0f);
  for (int i = 0; i < N; ++i) m = vmaxnmq_f32(m, vabsq_f32(v[i]));
  return vmaxnmvq_f32(m);
}

// round_to_int16 of 4 values (kernels_int8.h): half to even, and -32768 past int16 (a NaN).
inline int16x4_t to_int16(float32x4_t v) {
  return vqmovn_s32(vbslq_s32(vcaleq_f32(v, vdupq_n_f32(32767.0f)), vcvtnq_s32_f32(v), vdupq_n_s32(-32768)));
}

void quantize_block_neon(const float* v, int8_t* q, float* d, int32_t* sum) {
  float32x4_t x[8];
  for (int i = 0; i < 8; ++i) x[i] = vld1q_f32(v + 4 * i);
  const float amax = max_abs(x);
  const float scale = amax / 127.0f;
  const float inv = scale != 0.0f ? 1.0f / scale : 0.0f;
  int32x4_t s = vdupq_n_s32(0);
  int16x8_t h[4];
  for (int i = 0; i < 4; ++i) {
    const int32x4_t a = vcvtnq_s32_f32(vmulq_n_f32(x[2 * i], inv));  // round half to even
    const int32x4_t b = vcvtnq_s32_f32(vmulq_n_f32(x[2 * i + 1], inv));
    s = vaddq_s32(s, vaddq_s32(a, b));
    h[i] = vcombine_s16(vqmovn_s32(a), vqmovn_s32(b));
  }
  vst1q_s8(q, vcombine_s8(vqmovn_s16(h[0]), vqmovn_s16(h[1])));
  vst1q_s8(q + 16, vcombine_s8(vqmovn_s16(h[2]), vqmovn_s16(h[3])));
  *d = scale;
  *sum = vaddvq_s32(s);
}

void quantize_row_neon(const float* x, int64_t n, int8_t* q, float* d, int32_t* sum) {
  int64_t b = 0;
  for (; (b + 1) * kQ8Block <= n; ++b) quantize_block_neon(x + b * kQ8Block, q + b * kQ8Block, d + b, sum + b);
  if (b * kQ8Block < n) {
    float v[kQ8Block] = {};
    std::memcpy(v, x + b * kQ8Block, static_cast<size_t>(n - b * kQ8Block) * sizeof(float));
    quantize_block_scalar(v, q + b * kQ8Block, d + b, sum + b);
  }
}

// Dot products of the 8 lanes of one 32-value panel block (8 chunks of 32 bytes at w) with
// NT tokens' activation blocks: lanes 0..3 of token t in lo[t], 4..7 in hi[t]. Each weight
// chunk is loaded once for the NT tokens. sdot takes token t's values 0..15 in x0[t] and
// 16..31 in x1[t], one half block at a time (dot_half_sdot: chunks 0..3 at w against lanes
// 0..3 of x[t]); the widening products read its 32 int8 at x + t * ldx. kAccumulate: sdot
// adds to lo and hi instead of starting from zero.
#if NL_INT8_DOTPROD
template <int NT, bool kAccumulate = false>
inline void dot_half_sdot(const uint8_t* w, const int8x16_t x[NT], int32x4_t lo[NT], int32x4_t hi[NT]) {
  if (!kAccumulate)
    for (int t = 0; t < NT; ++t) lo[t] = hi[t] = vdupq_n_s32(0);
  // The lane of vdotq_laneq_s32 must be a constant: chunk c is lane c of x.
#define NL_SDOT_CHUNK(c)                                                  \
  {                                                                       \
    const int8x16_t wa = vreinterpretq_s8_u8(vld1q_u8(w + (c) * 32));     \
    const int8x16_t wb = vreinterpretq_s8_u8(vld1q_u8(w + (c) * 32 + 16)); \
    for (int t = 0; t < NT; ++t) {                                        \
      lo[t] = vdotq_laneq_s32(lo[t], wa, x[t], c);                        \
      hi[t] = vdotq_laneq_s32(hi[t], wb, x[t], c);                        \
    }                                                                     \
  }
  NL_SDOT_CHUNK(0)
  NL_SDOT_CHUNK(1)
  NL_SDOT_CHUNK(2)
  NL_SDOT_CHUNK(3)
#undef NL_SDOT_CHUNK
}

template <int NT, bool kAccumulate = false>
inline void dot_tokens_sdot(const uint8_t* w, const int8x16_t x0[NT], const int8x16_t x1[NT], int32x4_t lo[NT],
                            int32x4_t hi[NT]) {
  dot_half_sdot<NT, kAccumulate>(w, x0, lo, hi);
  dot_half_sdot<NT, true>(w + 4 * 32, x1, lo, hi);
}
#endif

// kSmall: the panel holds small values, Q4_0's (0..15 in forward panels, -8..7 in
// input-gradient ones) or Signed5's (-16..15), so a lane's products of a block are summed in
// int16 by vmlal_s8 and widened once per block: 4 multiply-adds per chunk and token instead
// of 4 multiplies and 4 pairwise accumulates. The int16 bound: 8 chunks x 16 x 128 = 16384
// (forward), kGradChunks (16) chunks x 8 x 128 = 16384 (input gradient; Signed5 panels there
// in two runs of 8 chunks). Other panels (|w| up to 128) widen every chunk. The high halves
// go through the _high forms (smull2, smlal2), not a copy of the upper 8 bytes. kChunks:
// 4-byte chunks of x per token (32 values in the forward's blocks, the 64 rows of an
// input-gradient row block). kNegated (kSmall only): the sums of the negated products
// (vmlsl_s8), for Signed6's values (-32..31): -(w x) is within [-4096, 4064], so 8 chunks
// stay within int16 even at x = -128 (a non-finite input's), where 8 x 4096 would not.
template <int NT, bool kSmall, int kChunks = 8, bool kNegated = false>
inline void dot_tokens_widening(const uint8_t* w, const int8_t* x, int64_t ldx, int32x4_t lo[NT], int32x4_t hi[NT]) {
  // Lanes of acc[t][k]: [lane 2k: two pair sums][lane 2k+1: two pair sums]; lane j of
  // sum16[t][k]: panel lane 2k + j / 4, byte j % 4.
  int32x4_t acc[NT][4];
  int16x8_t sum16[NT][4];
  for (int t = 0; t < NT; ++t)
    for (int k = 0; k < 4; ++k) {
      acc[t][k] = vdupq_n_s32(0);
      sum16[t][k] = vdupq_n_s16(0);
    }
  for (int c = 0; c < kChunks; ++c) {
    const int8x16_t w0 = vreinterpretq_s8_u8(vld1q_u8(w + c * 32)), w1 = vreinterpretq_s8_u8(vld1q_u8(w + c * 32 + 16));
    for (int t = 0; t < NT; ++t) {
      int32_t chunk;
      std::memcpy(&chunk, x + t * ldx + 4 * c, 4);
      const int8x16_t xc = vreinterpretq_s8_s32(vdupq_n_s32(chunk));
      if constexpr (kNegated) {
        sum16[t][0] = vmlsl_s8(sum16[t][0], vget_low_s8(w0), vget_low_s8(xc));
        sum16[t][1] = vmlsl_high_s8(sum16[t][1], w0, xc);
        sum16[t][2] = vmlsl_s8(sum16[t][2], vget_low_s8(w1), vget_low_s8(xc));
        sum16[t][3] = vmlsl_high_s8(sum16[t][3], w1, xc);
      } else if constexpr (kSmall) {
        sum16[t][0] = vmlal_s8(sum16[t][0], vget_low_s8(w0), vget_low_s8(xc));
        sum16[t][1] = vmlal_high_s8(sum16[t][1], w0, xc);
        sum16[t][2] = vmlal_s8(sum16[t][2], vget_low_s8(w1), vget_low_s8(xc));
        sum16[t][3] = vmlal_high_s8(sum16[t][3], w1, xc);
      } else {
        acc[t][0] = vpadalq_s16(acc[t][0], vmull_s8(vget_low_s8(w0), vget_low_s8(xc)));
        acc[t][1] = vpadalq_s16(acc[t][1], vmull_high_s8(w0, xc));
        acc[t][2] = vpadalq_s16(acc[t][2], vmull_s8(vget_low_s8(w1), vget_low_s8(xc)));
        acc[t][3] = vpadalq_s16(acc[t][3], vmull_high_s8(w1, xc));
      }
    }
  }
  for (int t = 0; t < NT; ++t) {
    if constexpr (kSmall)
      for (int k = 0; k < 4; ++k) acc[t][k] = vpaddlq_s16(sum16[t][k]);
    lo[t] = vpaddq_s32(acc[t][0], acc[t][1]);
    hi[t] = vpaddq_s32(acc[t][2], acc[t][3]);
  }
}

#if !NL_INT8_DOTPROD
// Signed5 panels (Q5_K) in the widening set: dot_tokens_widening's int16 sums (kSmall) over
// kChunks chunks, with each token's activations taken 4 chunks at a time, x(g, t) giving
// chunks 4g..4g+3 of token t (16 bytes, loaded or in registers), and each chunk broadcast
// from its lane. kNegated: the sums of the negated products, -(w x) within [-2048, 2032], so
// the input gradient's 16 chunks (kGradChunks) fit int16 in one run ([-32768, 32512]; the
// products themselves could reach 16 x 2048 = 32768 at x = -128). With dot_tokens_widening
// (4-byte loads, GCC's unrolled loop spilling sums) Q5_K's forward counted 428 and its input
// gradient (two runs of 8 chunks through a buffer) 460 instructions per 1k multiply-adds on
// cortex-a53; with this 369 and 359 (bench/arm64_icount.sh, 128 x 512, 128 tokens).
template <int NT, int kChunks, bool kNegated, class X>
__attribute__((always_inline)) inline void dot_tokens_signed5(const uint8_t* w, X&& x, int32x4_t lo[NT],
                                                              int32x4_t hi[NT]) {
  int16x8_t sum16[NT][4];  // as dot_tokens_widening's
  for (int t = 0; t < NT; ++t)
    for (int k = 0; k < 4; ++k) sum16[t][k] = vdupq_n_s16(0);
#pragma GCC unroll 4
  for (int g = 0; g < kChunks / 4; ++g) {  // (unrolled: x's arrays and lanes by constants)
    int32x4_t xg[NT];
    for (int t = 0; t < NT; ++t) xg[t] = x(g, t);
    // The lane of vdupq_laneq_s32 must be a constant: chunk 4g + c is lane c of xg.
#define NL_SIGNED5_CHUNK(c)                                                            \
  {                                                                                    \
    const uint8_t* wc = w + (4 * g + (c)) * 32;                                        \
    const int8x16_t w0 = vreinterpretq_s8_u8(vld1q_u8(wc)), w1 = vreinterpretq_s8_u8(vld1q_u8(wc + 16)); \
    for (int t = 0; t < NT; ++t) {                                                     \
      const int8x16_t xc = vreinterpretq_s8_s32(vdupq_laneq_s32(xg[t], c));           \
      if constexpr (kNegated) {                                                        \
        sum16[t][0] = vmlsl_s8(sum16[t][0], vget_low_s8(w0), vget_low_s8(xc));         \
        sum16[t][1] = vmlsl_high_s8(sum16[t][1], w0, xc);                              \
        sum16[t][2] = vmlsl_s8(sum16[t][2], vget_low_s8(w1), vget_low_s8(xc));         \
        sum16[t][3] = vmlsl_high_s8(sum16[t][3], w1, xc);                              \
      } else {                                                                         \
        sum16[t][0] = vmlal_s8(sum16[t][0], vget_low_s8(w0), vget_low_s8(xc));         \
        sum16[t][1] = vmlal_high_s8(sum16[t][1], w0, xc);                              \
        sum16[t][2] = vmlal_s8(sum16[t][2], vget_low_s8(w1), vget_low_s8(xc));         \
        sum16[t][3] = vmlal_high_s8(sum16[t][3], w1, xc);                              \
      }                                                                                \
    }                                                                                  \
  }
    NL_SIGNED5_CHUNK(0)
    NL_SIGNED5_CHUNK(1)
    NL_SIGNED5_CHUNK(2)
    NL_SIGNED5_CHUNK(3)
#undef NL_SIGNED5_CHUNK
  }
  for (int t = 0; t < NT; ++t) {
    lo[t] = vpaddq_s32(vpaddlq_s16(sum16[t][0]), vpaddlq_s16(sum16[t][1]));
    hi[t] = vpaddq_s32(vpaddlq_s16(sum16[t][2]), vpaddlq_s16(sum16[t][3]));
    if constexpr (kNegated) {
      lo[t] = vnegq_s32(lo[t]);
      hi[t] = vnegq_s32(hi[t]);
    }
  }
}
#endif

// kSmall: the panel holds small values (dot_tokens_widening; sdot needs no distinction).
template <int NT, bool kSmall>
inline void dot_tokens(const uint8_t* w, const int8_t* x, int64_t ldx, int32x4_t lo[NT], int32x4_t hi[NT]) {
#if NL_INT8_DOTPROD
  int8x16_t x0[NT], x1[NT];
  for (int t = 0; t < NT; ++t) {
    x0[t] = vld1q_s8(x + t * ldx);
    x1[t] = vld1q_s8(x + t * ldx + 16);
  }
  dot_tokens_sdot<NT>(w, x0, x1, lo, hi);
#else
  dot_tokens_widening<NT, kSmall>(w, x, ldx, lo, hi);
#endif
}

#if !NL_INT8_DOTPROD
// Half h of a Signed6 block for the widening set (dot_tokens_q6k): its chunks 0..3 at w
// against x + t * ldx, each lane's 4 negated products summed in int16 (vmlsl_s8), then pairs
// of lanes (vpaddq_s16): rows 4i..4i+3 in pairs[t][h][i], each row's two pairs in turn.
template <int NT>
inline void half_pairs_q6k(const uint8_t* w, const int8_t* x, int64_t ldx, int16x8_t pairs[NT][2][2], int h) {
  // Lane j of sum16[t][k]: panel lane 2k + j / 4, byte j % 4.
  int16x8_t sum16[NT][4];
  for (int t = 0; t < NT; ++t)
    for (int k = 0; k < 4; ++k) sum16[t][k] = vdupq_n_s16(0);
  for (int c = 0; c < 4; ++c) {
    const int8x16_t w0 = vreinterpretq_s8_u8(vld1q_u8(w + c * 32)), w1 = vreinterpretq_s8_u8(vld1q_u8(w + c * 32 + 16));
    for (int t = 0; t < NT; ++t) {
      int32_t chunk;
      std::memcpy(&chunk, x + t * ldx + 4 * c, 4);
      const int8x16_t xc = vreinterpretq_s8_s32(vdupq_n_s32(chunk));
      sum16[t][0] = vmlsl_s8(sum16[t][0], vget_low_s8(w0), vget_low_s8(xc));
      sum16[t][1] = vmlsl_high_s8(sum16[t][1], w0, xc);
      sum16[t][2] = vmlsl_s8(sum16[t][2], vget_low_s8(w1), vget_low_s8(xc));
      sum16[t][3] = vmlsl_high_s8(sum16[t][3], w1, xc);
    }
  }
  for (int t = 0; t < NT; ++t)
    for (int i = 0; i < 2; ++i) pairs[t][h][i] = vpaddq_s16(sum16[t][2 * i], sum16[t][2 * i + 1]);
}
#endif

// Signed6 panels (Q6_K): isum of kernels_int8.h, each half block's dot products (chunks 0..3,
// 4..7) times its rows' integer scales sc (the block's sub_scales: 2 halves x 8 rows, as
// scale_pair), lanes 0..3 of token t in lo[t], 4..7 in hi[t]. sdot: an int32 sum per half,
// multiplied by sc (vmulq_s32, vmlaq_s32). The widening set: a lane's 4 products of a half
// (|w x| <= 4096) sum in int16, then pairs of lanes (vpaddq_s16) reach 8 products, which fit
// int16 as the negated ones of dot_tokens_widening (kNegated); the scale pairs hold each
// row's sc twice, as those pairs lie, so vmull_s16 / vmlal_s16 by -sc widen them into the
// rows' scaled sums (|isum| <= 2 x 16 x 4096 x 128 = 2^24) and one vpaddq_s32 adds the pairs.
template <int NT>
inline void dot_tokens_q6k(const uint8_t* w, const int8_t* x, int64_t ldx, const int32_t* sc, int32x4_t lo[NT],
                           int32x4_t hi[NT]) {
#if NL_INT8_DOTPROD
  int32x4_t lo1[NT], hi1[NT];
  int8x16_t xh[NT];
  for (int t = 0; t < NT; ++t) xh[t] = vld1q_s8(x + t * ldx);
  dot_half_sdot<NT>(w, xh, lo, hi);
  for (int t = 0; t < NT; ++t) xh[t] = vld1q_s8(x + t * ldx + 16);
  dot_half_sdot<NT>(w + 4 * 32, xh, lo1, hi1);
  int32x4_t s[4];  // half 0's rows 0..3 and 4..7, then half 1's
  for (int i = 0; i < 4; ++i) s[i] = vshrq_n_s32(vld1q_s32(sc + 4 * i), 16);
  for (int t = 0; t < NT; ++t) {
    lo[t] = vmlaq_s32(vmulq_s32(lo[t], s[0]), lo1[t], s[2]);
    hi[t] = vmlaq_s32(vmulq_s32(hi[t], s[1]), hi1[t], s[3]);
  }
#else
  int16x8_t pairs[NT][2][2];  // [t][h][i]: half h's lane pairs of rows 4i..4i+3 (negated)
  // The halves one after the other: the empty asm keeps GCC from loading the second half's
  // chunks before the first half's sums are done; interleaved, both halves' 16 sums per
  // token spilled and the kernel counted 23% more instructions on cortex-a53
  // (bench/arm64_icount.sh).
  half_pairs_q6k<NT>(w, x, ldx, pairs, 0);
  asm volatile("" ::: "memory");
  half_pairs_q6k<NT>(w + 4 * 32, x + 16, ldx, pairs, 1);
  int16x8_t s[2][2];  // -sc of half h, rows 4i..4i+3, each twice
  for (int h = 0; h < 2; ++h)
    for (int i = 0; i < 2; ++i) s[h][i] = vnegq_s16(vreinterpretq_s16_s32(vld1q_s32(sc + 8 * h + 4 * i)));
  for (int t = 0; t < NT; ++t)
    for (int i = 0; i < 2; ++i) {  // rows 4i..4i+3: lane pairs of rows 4i, 4i + 1, ... in each half
      const int16x8_t p0 = pairs[t][0][i], p1 = pairs[t][1][i];
      const int32x4_t a = vmlal_s16(vmull_s16(vget_low_s16(p0), vget_low_s16(s[0][i])), vget_low_s16(p1),
                                    vget_low_s16(s[1][i]));
      const int32x4_t b = vmlal_high_s16(vmull_high_s16(p0, s[0][i]), p1, s[1][i]);
      (i == 0 ? lo : hi)[t] = vpaddq_s32(a, b);
    }
#endif
}

// Runs kernel<NT>(t, NT) over nt tokens in blocks of kBlock (4 by default), then one at a time.
template <int kBlock = 4, class F>
inline void token_blocks(int64_t nt, F&& kernel) {
  int64_t t = 0;
  for (; t + kBlock <= nt; t += kBlock) kernel.template operator()<kBlock>(t);
  for (; t < nt; ++t) kernel.template operator()<1>(t);
}

// For the widening set: kSmall, a Q4_0 or Signed5 panel (int16 sums); kNibble, Q4_0's (the
// offset). sdot takes every panel as kSmall = kNibble = false. kSigned6: a Signed6 panel
// (dot_tokens_q6k), in the widening set 2 tokens at a time (3 or 4 counted 4% and 6% more
// instructions on cortex-a53; sdot's 4 counted 7% fewer than 3). Signed5 panels (kSmall, not
// kNibble) in the widening set: dot_tokens_signed5, 2 tokens at a time as well (4 counted
// 367 against 369 instructions per 1k multiply-adds on cortex-a53, but GCC spills 4 tokens'
// sums as it pleases: 276 instructions per block and 4 tokens in one build, 315 after a small
// change to the kernel, where 2 tokens' took 137-139 in every form tried).
template <bool kSmall, bool kNibble, bool kSigned6 = false>
void forward_kind_neon(const int8_t* q, const float* d, const int32_t* sum, int64_t ldq, int64_t nt,
                       const ForwardPanel& p, int64_t nr, float* Y, int64_t ldy) {
  const int64_t blocks = ldq / kQ8Block;
  // The nibble offset: decided at compile time for the widening set, at run time for sdot
  // (both ways as counted best: bench/arm64_icount.sh).
  const bool nibble = NL_INT8_DOTPROD ? p.kind == Int8Kind::Nibble : kNibble;
  constexpr bool kSigned5 = kSmall && !kNibble;
  token_blocks<(kSigned6 || kSigned5) && !NL_INT8_DOTPROD ? 2 : 4>(nt, [&]<int NT>(int64_t t0) {
    float32x4_t acc_lo[NT], acc_hi[NT];
    for (int t = 0; t < NT; ++t) acc_lo[t] = acc_hi[t] = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < p.blocks; ++b) {
      int32x4_t lo[NT], hi[NT];
      if constexpr (kSigned6)
        dot_tokens_q6k<NT>(p.q.data() + b * 256, q + t0 * ldq + b * kQ8Block, ldq, p.sub_scales.data() + b * 16, lo,
                           hi);
      else if constexpr (!NL_INT8_DOTPROD && kSigned5) {
        const int8_t* x = q + t0 * ldq + b * kQ8Block;
        dot_tokens_signed5<NT, 8, false>(
            p.q.data() + b * 256,
            [&](int g, int t) { return vreinterpretq_s32_s8(vld1q_s8(x + t * ldq + 16 * g)); }, lo, hi);
      } else {
        dot_tokens<NT, kSmall>(p.q.data() + b * 256, q + t0 * ldq + b * kQ8Block, ldq, lo, hi);
      }
      const float32x4_t dw_lo = vld1q_f32(p.d.data() + b * 8), dw_hi = vld1q_f32(p.d.data() + b * 8 + 4);
      for (int t = 0; t < NT; ++t) {
        const int64_t i = (t0 + t) * blocks + b;
        if (nibble) {
          const int32x4_t offset = vdupq_n_s32(8 * sum[i]);
          lo[t] = vsubq_s32(lo[t], offset);
          hi[t] = vsubq_s32(hi[t], offset);
        }
        acc_lo[t] = vfmaq_f32(acc_lo[t], vcvtq_f32_s32(lo[t]), vmulq_n_f32(dw_lo, d[i]));
        acc_hi[t] = vfmaq_f32(acc_hi[t], vcvtq_f32_s32(hi[t]), vmulq_n_f32(dw_hi, d[i]));
      }
    }
    for (int t = 0; t < NT; ++t) {
      float tmp[8];
      vst1q_f32(tmp, acc_lo[t]);
      vst1q_f32(tmp + 4, acc_hi[t]);
      std::memcpy(Y + (t0 + t) * ldy, tmp, static_cast<size_t>(nr) * sizeof(float));
    }
  });
}

// The forward of every kind but Signed6, and Signed6's (forward_neon chooses). Apart, as
// GCC compiled the other kinds before Signed6 came: one function with Signed6's kernel
// inside, or with each kind's out of line, counted up to 7% more instructions for some kinds
// (cortex-a53: Q4_0's 364 -> 389 per 1k multiply-adds inside, Q5_K's 428 -> 440 out of line;
// bench/arm64_icount.sh).
__attribute__((noinline)) void forward_unscaled_neon(const int8_t* q, const float* d, const int32_t* sum, int64_t ldq,
                                                     int64_t nt, const ForwardPanel& p, int64_t nr, float* Y,
                                                     int64_t ldy) {
  if (!NL_INT8_DOTPROD && p.kind == Int8Kind::Nibble)
    forward_kind_neon<true, true>(q, d, sum, ldq, nt, p, nr, Y, ldy);
  else if (!NL_INT8_DOTPROD && p.kind == Int8Kind::Signed5)
    forward_kind_neon<true, false>(q, d, sum, ldq, nt, p, nr, Y, ldy);
  else
    forward_kind_neon<false, false>(q, d, sum, ldq, nt, p, nr, Y, ldy);
}
__attribute__((noinline)) void forward_signed6_neon(const int8_t* q, const float* d, const int32_t* sum, int64_t ldq,
                                                    int64_t nt, const ForwardPanel& p, int64_t nr, float* Y,
                                                    int64_t ldy) {
  forward_kind_neon<false, false, true>(q, d, sum, ldq, nt, p, nr, Y, ldy);
}

void forward_neon(const int8_t* q, const float* d, const int32_t* sum, int64_t ldq, int64_t nt, const ForwardPanel& p,
                  int64_t nr, float* Y, int64_t ldy) {
  if (p.kind == Int8Kind::Signed6)
    forward_signed6_neon(q, d, sum, ldq, nt, p, nr, Y, ldy);
  else
    forward_unscaled_neon(q, d, sum, ldq, nt, p, nr, Y, ldy);
}

// grad_rows (kernels_int8.h) with the scalar's arithmetic (the same maximum and conversion);
// the tail block goes through the scalar definition.
void grad_rows_neon(const float* g, int64_t n, float* ey, int16_t* y, int64_t ldb) {
  int64_t R = 0;
  constexpr int kRegs = kGradRowBlock / 4;
  for (; (R + 1) * kGradRowBlock <= n; ++R) {
    float32x4_t v[kRegs];
    for (int i = 0; i < kRegs; ++i) v[i] = vld1q_f32(g + R * kGradRowBlock + 4 * i);
    ey[R] = max_abs<kRegs>(v) / 127.0f;
    const float inv = ey[R] != 0.0f ? 1.0f / ey[R] : 0.0f;
    for (int i = 0; i < kRegs; ++i) vst1_s16(y + R * ldb + 4 * i, to_int16(vmulq_n_f32(vmulq_n_f32(v[i], inv), 256.0f)));
  }
  if (R * kGradRowBlock < n)
    int8_kernels_scalar().grad_rows(g + R * kGradRowBlock, n - R * kGradRowBlock, ey + R, y + R * ldb, ldb);
}

// requantize_grad_value(y16[r], rho16[r]) for 32 values of a row block, into x0 (r < 16)
// and x1: vqrdmulh is round(a b / 2^15) (it saturates only for -32768 x -32768); the second
// step, round(p 256 / 2^15) = (p + 64) >> 7 saturated to int8, is one vqrshrn #7 (the same
// bits as vqrdmulh by 256 and vqmovn for every int16 p, checked exhaustively under qemu;
// one instruction less per 8 rows).
inline void requantize_rows_neon(const int16_t* y16, const int16x8_t rho16[4], int8x16_t& x0, int8x16_t& x1) {
  int8x8_t q[4];
  for (int i = 0; i < 4; ++i) q[i] = vqrshrn_n_s16(vqrdmulhq_s16(vld1q_s16(y16 + 8 * i), rho16[i]), 7);
  x0 = vcombine_s8(q[0], q[1]);
  x1 = vcombine_s8(q[2], q[3]);
}

// The requantized dY of NT tokens is made once per row block for its 4 column groups:
// - sdot keeps it in registers (two per 32 rows and token) and adds the second 32 rows'
//   products into the first's sums; separate sums added afterwards needed 34 of the 32
//   vector registers for 4 tokens and GCC spilled (195 against 158 instructions per 1k
//   multiply-adds for Q4_0, bench/arm64_icount.sh);
// - the widening set reads 4-byte chunks from a buffer, all 64 rows in one pass (one
//   widening of Q4_0's int16 sums).
// Whole groups of 8 columns go straight to and from dX: compiled with a copy per group
// through a buffer, the output steps took more instructions than the dot products.
// kSmall: a Q4_0, Signed5 or Signed6 panel (the widening set's int16 sums, over kRun chunks
// at a time: 16, or 8 for Signed5's and Signed6's values, whose kernels take 2 tokens at a
// time: with 4 the two runs counted 508 instructions per 1k multiply-adds on cortex-a53, with
// 2 460, and with the runs' widening inside one loop of 2 tokens 575; bench/arm64_icount.sh).
// Signed5 (kRun 8, one part) now goes through dot_tokens_signed5: all 16 chunks in one
// negated run, dY's requantized registers as its activations (no buffer). At 128 x 256 and
// 64 tokens Q5_K counted 411 so, 440 in two runs of 8 through the buffer, 429 in two from
// the registers with an empty asm between them (512 with dot_tokens_widening).
// kParts: the panel's scale parts (GradPanel::parts): dY is requantized per part, for its
// 4 / kParts column groups. Signed6 panels (2 parts, values -32..31) sum their products
// negated in the widening set (dot_tokens_widening's kNegated). Not inlined into
// input_grad_neon: inlined, both kinds in one function, GCC's allocation of the Q8_0 kind's
// registers took it from 529 to 730 instructions per 1k multiply-adds (bench/arm64_icount.sh
// --cpu cortex-a53).
// The token blocks (tokens) are inlined into this function in the sdot set and for Signed6;
// the widening set's other kinds call them out of line, as GCC compiled them before kParts
// (inlined, as GCC then chose, Q8_0's input gradient counted 443 -> 500 instructions per 1k
// multiply-adds on cortex-a53, Q5_K's 460 -> 398, with dot_tokens_signed5 the same either
// way; Signed6's counts 387 inlined, 422 out of line; bench/arm64_icount.sh).
template <bool kSmall, int kRun = kGradChunks, int kParts = 1>
__attribute__((noinline)) void input_grad_kind_neon(const int16_t* Y, int64_t ldg, const float* ey, int64_t lds,
                                                    int64_t nt, const GradPanel& p, int64_t n, const GradOut& out) {
  constexpr int64_t kPartGroups = 4 / kParts;  // column groups per scale part
  const auto tokens = [&]<int NT>(int64_t t0) {
    const float* acc[NT];
    float* D[NT];
    for (int t = 0; t < NT; ++t) {
      const GradOut o = out.from_token(t0 + t);
      acc[t] = o.acc;
      D[t] = o.D;
    }
    constexpr int kHalves = kGradRowBlock / 32;
    for (int64_t sb = 0; sb < p.blocks * kParts; ++sb) {  // scale blocks: part sb % kParts of block b
      const int64_t b = sb / kParts, part = sb % kParts;
      int8x16_t x0[kHalves][NT], x1[kHalves][NT];
      for (int h = 0; h < kHalves; ++h) {
        int16x8_t rho16[4];
        for (int i = 0; i < 4; ++i) rho16[i] = vld1q_s16(p.rho16.data() + sb * kGradRowBlock + 32 * h + 8 * i);
        for (int t = 0; t < NT; ++t)  // dY with W's scales folded in, requantized per token
          requantize_rows_neon(Y + (t0 + t) * ldg + 32 * h, rho16, x0[h][t], x1[h][t]);
      }
#if !NL_INT8_DOTPROD
      constexpr bool kSigned5 = kSmall && kRun == 8 && kParts == 1;  // (dot_tokens_signed5, from x0, x1)
      int8_t x[NT][kGradRowBlock];
      if constexpr (!kSigned5)
        for (int h = 0; h < kHalves; ++h)
          for (int t = 0; t < NT; ++t) {
            vst1q_s8(x[t] + 32 * h, x0[h][t]);
            vst1q_s8(x[t] + 32 * h + 16, x1[h][t]);
          }
#endif
      float e[NT];
      for (int t = 0; t < NT; ++t) e[t] = ey[(t0 + t) * lds] * p.m[static_cast<size_t>(sb)];
      for (int64_t cg = part * kPartGroups; cg < (part + 1) * kPartGroups; ++cg) {
        const int64_t c0 = b * kQ8Block + cg * 8;
        if (c0 >= n) break;
        int32x4_t lo[NT], hi[NT];  // (the panel holds signed weight values, Q4_0's too)
        const uint8_t* w = p.q.data() + b * kGradPanelBlockBytes + cg * kGradChunks * 32;
#if NL_INT8_DOTPROD
        dot_tokens_sdot<NT>(w, x0[0], x1[0], lo, hi);
        for (int h = 1; h < kHalves; ++h) dot_tokens_sdot<NT, true>(w + h * 8 * 32, x0[h], x1[h], lo, hi);
#else
        constexpr bool kNegated = kParts == 2;  // (Signed6)
        if constexpr (kSigned5) {
          dot_tokens_signed5<NT, kGradChunks, true>(
              w, [&](int g, int t) { return vreinterpretq_s32_s8(g % 2 ? x1[g / 2][t] : x0[g / 2][t]); }, lo, hi);
        } else {
          dot_tokens_widening<NT, kSmall, kRun, kNegated>(w, x[0], kGradRowBlock, lo, hi);
          for (int h = kRun; h < kGradChunks; h += kRun) {
            int32x4_t lo2[NT], hi2[NT];
            dot_tokens_widening<NT, kSmall, kRun, kNegated>(w + h * 32, x[0] + 4 * h, kGradRowBlock, lo2, hi2);
            for (int t = 0; t < NT; ++t) {
              lo[t] = vaddq_s32(lo[t], lo2[t]);
              hi[t] = vaddq_s32(hi[t], hi2[t]);
            }
          }
          if constexpr (kNegated)
            for (int t = 0; t < NT; ++t) {
              lo[t] = vnegq_s32(lo[t]);
              hi[t] = vnegq_s32(hi[t]);
            }
        }
#endif
        if (c0 + 8 <= n) {
          for (int t = 0; t < NT; ++t) {
            const float32x4_t a0 = acc[t] ? vld1q_f32(acc[t] + c0) : vdupq_n_f32(0.0f);
            const float32x4_t a1 = acc[t] ? vld1q_f32(acc[t] + c0 + 4) : vdupq_n_f32(0.0f);
            vst1q_f32(D[t] + c0, vfmaq_n_f32(a0, vcvtq_f32_s32(lo[t]), e[t]));
            vst1q_f32(D[t] + c0 + 4, vfmaq_n_f32(a1, vcvtq_f32_s32(hi[t]), e[t]));
          }
          continue;
        }
        const size_t bytes = static_cast<size_t>(n - c0) * sizeof(float);  // a ragged last group
        for (int t = 0; t < NT; ++t) {
          float tmp[8] = {};
          if (acc[t]) std::memcpy(tmp, acc[t] + c0, bytes);
          vst1q_f32(tmp, vfmaq_n_f32(vld1q_f32(tmp), vcvtq_f32_s32(lo[t]), e[t]));
          vst1q_f32(tmp + 4, vfmaq_n_f32(vld1q_f32(tmp + 4), vcvtq_f32_s32(hi[t]), e[t]));
          std::memcpy(D[t] + c0, tmp, bytes);
        }
      }
    }
  };
  constexpr int kBlock = kRun < kGradChunks ? 2 : 4;
  if constexpr (NL_INT8_DOTPROD || kParts == 2)
    token_blocks<kBlock>(nt, tokens);
  else
    token_blocks<kBlock>(nt, [&]<int NT>(int64_t t0) __attribute__((noinline)) { tokens.template operator()<NT>(t0); });
}

void input_grad_neon(const int16_t* Y, int64_t ldg, const float* ey, int64_t lds, int64_t nt, const GradPanel& p,
                     int64_t n, const GradOut& out) {
  if (p.kind == Int8Kind::Nibble)
    input_grad_kind_neon<true>(Y, ldg, ey, lds, nt, p, n, out);
  else if (!NL_INT8_DOTPROD && p.kind == Int8Kind::Signed5)
    input_grad_kind_neon<true, 8>(Y, ldg, ey, lds, nt, p, n, out);
  else if (p.kind == Int8Kind::Signed6)
    input_grad_kind_neon<!NL_INT8_DOTPROD, NL_INT8_DOTPROD ? kGradChunks : 8, 2>(Y, ldg, ey, lds, nt, p, n, out);
  else
    input_grad_kind_neon<false>(Y, ldg, ey, lds, nt, p, n, out);
}

float tile_scale_neon(const uint8_t* tile, int64_t i) {
  __fp16 h;
  std::memcpy(&h, tile + i * 2, 2);
  return static_cast<float>(h);  // exact, subnormals included
}

// The 8 row scales of a tile as floats (0 for the rows past nr).
inline void tile_scales_neon(const uint8_t* tile, int64_t nr, float* out) {
  if (nr == kTileRows) {
    const float16x8_t h = vreinterpretq_f16_u8(vld1q_u8(tile));  // exact, subnormals included
    vst1q_f32(out, vcvt_f32_f16(vget_low_f16(h)));
    vst1q_f32(out + 4, vcvt_f32_f16(vget_high_f16(h)));
    return;
  }
  for (int64_t i = 0; i < 8; ++i) out[i] = i < nr ? tile_scale_neon(tile, i) : 0.0f;
}

// out[k] = dword k of rows a, b, c, d (a 4x4 transpose of 32-bit elements).
inline void transpose_dwords(uint8x16_t a, uint8x16_t b, uint8x16_t c, uint8x16_t d, uint8x16_t out[4]) {
  const uint32x4_t t0 = vtrn1q_u32(vreinterpretq_u32_u8(a), vreinterpretq_u32_u8(b));
  const uint32x4_t t1 = vtrn2q_u32(vreinterpretq_u32_u8(a), vreinterpretq_u32_u8(b));
  const uint32x4_t t2 = vtrn1q_u32(vreinterpretq_u32_u8(c), vreinterpretq_u32_u8(d));
  const uint32x4_t t3 = vtrn2q_u32(vreinterpretq_u32_u8(c), vreinterpretq_u32_u8(d));
  const auto u64 = [](uint32x4_t v) { return vreinterpretq_u64_u32(v); };
  out[0] = vreinterpretq_u8_u64(vtrn1q_u64(u64(t0), u64(t2)));
  out[1] = vreinterpretq_u8_u64(vtrn1q_u64(u64(t1), u64(t3)));
  out[2] = vreinterpretq_u8_u64(vtrn2q_u64(u64(t0), u64(t2)));
  out[3] = vreinterpretq_u8_u64(vtrn2q_u64(u64(t1), u64(t3)));
}

// One forward-panel block from the 8 rows' columns 0..15 (lo) and 16..31 (hi): two 4x4 dword
// transposes per half (chunk k of row i goes to out + 32 k + 4 i).
inline void store_forward_block(const uint8x16_t lo[8], const uint8x16_t hi[8], uint8_t* out) {
  uint8x16_t t[4];
  for (int half = 0; half < 2; ++half) {  // rows 0..3 then 4..7 of each chunk
    const int r = 4 * half;
    transpose_dwords(lo[r], lo[r + 1], lo[r + 2], lo[r + 3], t);
    for (int k = 0; k < 4; ++k) vst1q_u8(out + 32 * k + 16 * half, t[k]);
    transpose_dwords(hi[r], hi[r + 1], hi[r + 2], hi[r + 3], t);
    for (int k = 0; k < 4; ++k) vst1q_u8(out + 32 * (k + 4) + 16 * half, t[k]);
  }
}

// Chunk k (4 rows) of an input-gradient panel block at out from the 4 rows' columns 0..15
// (lo) and 16..31 (hi): per column group cg (8 columns) the rows' bytes interleaved per column.
inline void store_grad_chunk(const uint8x16_t lo[4], const uint8x16_t hi[4], uint8_t* out, int64_t k) {
  const uint8x8x4_t groups[4] = {
      {{vget_low_u8(lo[0]), vget_low_u8(lo[1]), vget_low_u8(lo[2]), vget_low_u8(lo[3])}},
      {{vget_high_u8(lo[0]), vget_high_u8(lo[1]), vget_high_u8(lo[2]), vget_high_u8(lo[3])}},
      {{vget_low_u8(hi[0]), vget_low_u8(hi[1]), vget_low_u8(hi[2]), vget_low_u8(hi[3])}},
      {{vget_high_u8(hi[0]), vget_high_u8(hi[1]), vget_high_u8(hi[2]), vget_high_u8(hi[3])}}};
  for (int cg = 0; cg < 4; ++cg) vst4_u8(out + (cg * kGradChunks + k) * 32, groups[cg]);
}

// pack_forward_tiles for one weight type (kQ4: Q4_0, else Q8_0): per tile, the 8 rows'
// 4-byte chunks are moved with two 4x4 dword transposes (chunk k of row i goes to
// out + 32 k + 4 i). Q4_0 nibbles stay unsigned; Q8_0 rows also give their weight sums.
template <bool kQ4>
void pack_forward_tiles_kind_neon(const TiledMatrix& m, int64_t g, ForwardPanel& p) {
  constexpr size_t kQuantBytes = kQ4 ? 16 : 32;
  const int64_t nr = m.group_rows(g), nb = m.n_blocks();
  const uint8x16_t low = vdupq_n_u8(0x0F);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* tile = m.tile(g, b);
    const uint8_t* quants = tile + static_cast<size_t>(nr) * sizeof(uint16_t);
    tile_scales_neon(tile, nr, p.d.data() + b * 8);
    uint8x16_t lo[8], hi[8];  // chunks 0..3 and 4..7 of each row (padded rows: 0)
    for (int64_t i = 0; i < 8; ++i) {
      if (i >= nr) {
        lo[i] = hi[i] = vdupq_n_u8(0);
      } else if (kQ4) {
        const uint8x16_t raw = vld1q_u8(quants + i * kQuantBytes);
        lo[i] = vandq_u8(raw, low);
        hi[i] = vshrq_n_u8(raw, 4);
      } else {
        lo[i] = vld1q_u8(quants + i * kQuantBytes);
        hi[i] = vld1q_u8(quants + i * kQuantBytes + 16);
        p.wsum[static_cast<size_t>(b * 8 + i)] =
            128 * (vaddlvq_s8(vreinterpretq_s8_u8(lo[i])) + vaddlvq_s8(vreinterpretq_s8_u8(hi[i])));
      }
    }
    if (!kQ4)
      for (int64_t i = nr; i < 8; ++i) p.wsum[static_cast<size_t>(b * 8 + i)] = 0;
    store_forward_block(lo, hi, p.q.data() + b * 256);
  }
}

// A Q4_K row group (kernels_int8.h): per super-block, each sub-block's 32 nibbles of the 8
// rows (64-value group j2: sub-block 2 j2 in the low nibbles, 2 j2 + 1 in the high ones)
// moved as Q4_0's are.
void pack_forward_q4k_tiles_neon(const TiledMatrix& m, int64_t g, ForwardPanel& p) {
  const int64_t nr = m.group_rows(g), nsb = m.n_blocks();
  p.start_kquant(m.type, nsb * 8);
  const uint8x16_t low = vdupq_n_u8(0x0F);
  for (int64_t sb = 0; sb < nsb; ++sb) {
    const uint8_t* tile = m.tile(g, sb);
    kquant_forward_panel_scales(m, g, sb, p);
    for (int j = 0; j < 8; ++j) {
      uint8x16_t lo[8], hi[8];  // columns 0..15 and 16..31 of each row (padded rows: 0)
      for (int64_t i = 0; i < 8; ++i) {
        if (i >= nr) {
          lo[i] = hi[i] = vdupq_n_u8(0);
          continue;
        }
        const uint8_t* qs = tile + static_cast<size_t>(i) * m.block_bytes + kQ4KQuantsOffset + 32 * (j / 2);
        const uint8x16_t a = vld1q_u8(qs), b = vld1q_u8(qs + 16);
        lo[i] = j % 2 == 0 ? vandq_u8(a, low) : vshrq_n_u8(a, 4);
        hi[i] = j % 2 == 0 ? vandq_u8(b, low) : vshrq_n_u8(b, 4);
      }
      store_forward_block(lo, hi, p.q.data() + (sb * 8 + j) * 256);
    }
  }
}

// 16 values of Q5_K sub-block j of one row from 16 bytes of its nibbles (the sub-block's in
// the low or high halves) and the matching 16 bytes of qh: (nibble | bit j of qh << 4) - 16 as
// signed bytes (kernels_int8.h: q5k_quant).
inline uint8x16_t q5k_values(const uint8_t* nibbles, const uint8_t* qh, int j) {
  const uint8x16_t raw = vld1q_u8(nibbles), h = vld1q_u8(qh);
  const uint8x16_t nib = j % 2 == 0 ? vandq_u8(raw, vdupq_n_u8(0x0F)) : vshrq_n_u8(raw, 4);
  const uint8x16_t bit = vandq_u8(vshlq_u8(h, vdupq_n_s8(static_cast<int8_t>(4 - j))), vdupq_n_u8(0x10));
  return vsubq_u8(vorrq_u8(nib, bit), vdupq_n_u8(16));
}

// A Q5_K row group: each sub-block's values q - 16 (Signed5 panels) and their sums (wsum).
void pack_forward_q5k_tiles_neon(const TiledMatrix& m, int64_t g, ForwardPanel& p) {
  const int64_t nr = m.group_rows(g), nsb = m.n_blocks();
  p.start_kquant(m.type, nsb * 8);
  for (int64_t sb = 0; sb < nsb; ++sb) {
    const uint8_t* tile = m.tile(g, sb);
    kquant_forward_panel_scales(m, g, sb, p);
    for (int j = 0; j < 8; ++j) {
      const int64_t b = sb * 8 + j;
      uint8x16_t lo[8], hi[8];  // columns 0..15 and 16..31 of each row (padded rows: 0)
      for (int64_t i = 0; i < 8; ++i) {
        if (i >= nr) {
          lo[i] = hi[i] = vdupq_n_u8(0);
          p.wsum[static_cast<size_t>(b * 8 + i)] = 0;
          continue;
        }
        const uint8_t* block = tile + static_cast<size_t>(i) * m.block_bytes;
        const uint8_t* qs = block + kQ5KQuantsOffset + 32 * (j / 2);
        lo[i] = q5k_values(qs, block + kQ5KHighBitsOffset, j);
        hi[i] = q5k_values(qs + 16, block + kQ5KHighBitsOffset + 16, j);
        p.wsum[static_cast<size_t>(b * 8 + i)] =
            128 * (vaddlvq_s8(vreinterpretq_s8_u8(lo[i])) + vaddlvq_s8(vreinterpretq_s8_u8(hi[i])));
      }
      store_forward_block(lo, hi, p.q.data() + b * 256);
    }
  }
}

// Column block j (< 8) of Q6_K blocks (kernels_int8.h: q6k_quant): where its low nibbles
// (the low halves of 32 bytes for j % 4 < 2, else the high ones) and high bit pairs (bits
// 2 (j % 4) of 32 bytes) lie, and the shifts that take them out, made once per column block.
struct Q6KColumns {
  size_t ql, qh;
  int8x16_t nibble_shift, pair_shift;  // right shifts as vshlq_u8 takes them: 0 or -4, -2 (j % 4)
  explicit Q6KColumns(int j)
      : ql(static_cast<size_t>(64 * (j / 4) + 32 * (j % 2))),
        qh(kQ6KHighBitsOffset + static_cast<size_t>(32 * (j / 4))),
        nibble_shift(vdupq_n_s8(j % 4 < 2 ? 0 : -4)),
        pair_shift(vdupq_n_s8(static_cast<int8_t>(-2 * (j % 4)))) {}
  // Values k0..k0+15 of the column block in one row's block: q - 32 as signed bytes (vsli
  // keeps the nibble's low 4 bits and puts the pair above them).
  uint8x16_t values(const uint8_t* block, int k0) const {
    const uint8x16_t nibble = vshlq_u8(vld1q_u8(block + ql + k0), nibble_shift);
    const uint8x16_t pair = vandq_u8(vshlq_u8(vld1q_u8(block + qh + k0), pair_shift), vdupq_n_u8(3));
    return vsubq_u8(vsliq_n_u8(nibble, pair, 4), vdupq_n_u8(32));
  }
};

// A Q6_K row group: each block's values q - 32 (Signed6 panels), the scales
// (q6k_forward_panel_scales) and the scaled sums of the values (wsum).
void pack_forward_q6k_tiles_neon(const TiledMatrix& m, int64_t g, ForwardPanel& p) {
  const int64_t nr = m.group_rows(g), nsb = m.n_blocks();
  p.start_q6k(nsb * 8);
  for (int64_t sb = 0; sb < nsb; ++sb) {
    const uint8_t* tile = m.tile(g, sb);
    q6k_forward_panel_scales(m, g, sb, p);
    for (int j = 0; j < 8; ++j) {
      const int64_t b = sb * 8 + j;
      const Q6KColumns columns(j);
      uint8x16_t lo[8], hi[8];  // columns 0..15 and 16..31 of each row (padded rows: 0)
      for (int64_t i = 0; i < 8; ++i) {
        if (i >= nr) {
          lo[i] = hi[i] = vdupq_n_u8(0);
          p.wsum[static_cast<size_t>(b * 8 + i)] = 0;
          continue;
        }
        const uint8_t* block = tile + static_cast<size_t>(i) * m.block_bytes;
        lo[i] = columns.values(block, 0);
        hi[i] = columns.values(block, 16);
        p.wsum[static_cast<size_t>(b * 8 + i)] = 128 * (p.sub_scale(b, 0, i) * vaddlvq_s8(vreinterpretq_s8_u8(lo[i])) +
                                                        p.sub_scale(b, 1, i) * vaddlvq_s8(vreinterpretq_s8_u8(hi[i])));
      }
      store_forward_block(lo, hi, p.q.data() + b * 256);
    }
  }
}

void pack_forward_tiles_neon(const TiledMatrix& m, int64_t g, ForwardPanel& p) {
  if (m.type == QType::Q4_K) return pack_forward_q4k_tiles_neon(m, g, p);
  if (m.type == QType::Q5_K) return pack_forward_q5k_tiles_neon(m, g, p);
  if (m.type == QType::Q6_K) return pack_forward_q6k_tiles_neon(m, g, p);
  const bool q4 = m.type == QType::Q4_0;
  p.kind = legacy_tile_kind(m);
  p.has_offsets = false;
  p.resize(m.n_blocks());
  q4 ? pack_forward_tiles_kind_neon<true>(m, g, p) : pack_forward_tiles_kind_neon<false>(m, g, p);
}

// pack_grad_tiles for one weight type (kQ4: Q4_0, else Q8_0), as on AVX2
// (pack_grad_tiles_kind in kernels_int8_avx2_body.h): kFull, the row block's 64 rows all
// exist, so each of its 8 tiles is addressed once per column block and no row is checked.
template <bool kQ4, bool kFull>
void pack_grad_tiles_kind_neon(const TiledMatrix& m, int64_t rb, int64_t b0, int64_t b1, GradPanel& p) {
  constexpr size_t kQuantBytes = kQ4 ? 16 : 32;  // one row's quants in a tile
  const uint8x16_t low = vdupq_n_u8(0x0F), eight = vdupq_n_u8(8);
  for (int64_t b = b0; b < b1; ++b) {
    uint8_t* out = p.q.data() + (b - b0) * kGradPanelBlockBytes;
    float* scales = p.rho.data() + (b - b0) * kGradRowBlock;
    constexpr int64_t kGroups = kGradRowBlock / kTileRows;
    for (int64_t gi = 0; gi < kGroups; ++gi) {  // the row block's row groups (tiles), 2 chunks each
      const int64_t g = rb * kGroups + gi;
      const int64_t nr = kFull ? kTileRows : g * kTileRows < m.rows ? m.group_rows(g) : 0;
      const uint8_t* tile = nr > 0 ? m.tile(g, b) : nullptr;
      tile_scales_neon(tile, nr, scales + 8 * gi);
      const uint8_t* quants = tile + static_cast<size_t>(nr) * sizeof(uint16_t);
      for (int64_t k = 2 * gi; k < 2 * gi + 2; ++k) {  // chunk k: rows 4k .. 4k+3 of the row block
        const int64_t i0 = 4 * (k - 2 * gi);
        uint8x16_t lo[4], hi[4];  // columns 0..15 and 16..31 of the 4 rows, as signed values
        for (int64_t s = 0; s < 4; ++s) {
          if (!kFull && i0 + s >= nr) {  // a padded row: value 0
            lo[s] = hi[s] = vdupq_n_u8(0);
            continue;
          }
          const uint8_t* q = quants + (i0 + s) * kQuantBytes;
          if (kQ4) {  // low nibbles: columns 0..15, high ones 16..31; values u - 8
            const uint8x16_t raw = vld1q_u8(q);
            lo[s] = vsubq_u8(vandq_u8(raw, low), eight);
            hi[s] = vsubq_u8(vshrq_n_u8(raw, 4), eight);
          } else {
            lo[s] = vld1q_u8(q);
            hi[s] = vld1q_u8(q + 16);
          }
        }
        store_grad_chunk(lo, hi, out, k);
      }
    }
  }
}

// normalize_grad_scales (kernels_int8.h) in registers: the same maximum, and IEEE division
// is exact in any width.
void normalize_grad_scales_neon(GradPanel& p) {
  for (int64_t b = 0; b < p.scale_blocks(); ++b) {
    constexpr int kRegs = kGradRowBlock / 4;
    float* rho = p.rho.data() + b * kGradRowBlock;
    float32x4_t v[kRegs];
    for (int i = 0; i < kRegs; ++i) v[i] = vld1q_f32(rho + 4 * i);
    const float m = max_abs<kRegs>(v);
    p.m[static_cast<size_t>(b)] = m;
    for (int i = 0; i < kRegs; ++i) {
      v[i] = m != 0.0f ? vdivq_f32(v[i], vdupq_n_f32(m)) : vdupq_n_f32(0.0f);
      vst1q_f32(rho + 4 * i, v[i]);
      vst1_s16(p.rho16.data() + b * kGradRowBlock + 4 * i, to_int16(vmulq_n_f32(v[i], 16384.0f)));
    }
  }
}

// pack_grad_tiles for Q4_K and Q5_K: each row's 32 nibbles of sub-block j (the low or high
// halves of 32 bytes), values q - 8 (Q4_K) or, with the high bits, q - 16 (Q5_K), interleaved
// per column as above.
void pack_grad_kquant_tiles_neon(const TiledMatrix& m, int64_t rb, int64_t b0, int64_t b1, GradPanel& p) {
  const bool q5 = m.type == QType::Q5_K;
  const uint8x16_t low = vdupq_n_u8(0x0F), eight = vdupq_n_u8(8);
  constexpr int64_t kGroups = kGradRowBlock / kTileRows;
  for (int64_t b = b0; b < b1; ++b) {
    const int j = static_cast<int>(b % 8);
    uint8_t* out = p.q.data() + (b - b0) * kGradPanelBlockBytes;
    float* scales = p.rho.data() + (b - b0) * kGradRowBlock;
    for (int64_t gi = 0; gi < kGroups; ++gi) {
      const int64_t g = rb * kGroups + gi;
      const int64_t nr = g * kTileRows < m.rows ? m.group_rows(g) : 0;
      const uint8_t* tile = nr > 0 ? m.tile(g, b / 8) : nullptr;
      for (int64_t i = 0; i < kTileRows; ++i)
        scales[8 * gi + i] = i < nr ? kquant_scale(tile + static_cast<size_t>(i) * m.block_bytes, j) : 0.0f;
      for (int64_t k = 2 * gi; k < 2 * gi + 2; ++k) {  // chunk k: rows 4k .. 4k+3 of the row block
        const int64_t i0 = 4 * (k - 2 * gi);
        uint8x16_t lo[4], hi[4];  // columns 0..15 and 16..31 of the 4 rows, as signed values
        for (int64_t s = 0; s < 4; ++s) {
          if (i0 + s >= nr) {  // a padded row: value 0
            lo[s] = hi[s] = vdupq_n_u8(0);
            continue;
          }
          const uint8_t* block = tile + static_cast<size_t>(i0 + s) * m.block_bytes;
          if (q5) {
            const uint8_t* q = block + kQ5KQuantsOffset + 32 * (j / 2);
            lo[s] = q5k_values(q, block + kQ5KHighBitsOffset, j);
            hi[s] = q5k_values(q + 16, block + kQ5KHighBitsOffset + 16, j);
            continue;
          }
          const uint8_t* q = block + kQ4KQuantsOffset + 32 * (j / 2);
          const uint8x16_t a = vld1q_u8(q), c = vld1q_u8(q + 16);
          lo[s] = vsubq_u8(j % 2 == 0 ? vandq_u8(a, low) : vshrq_n_u8(a, 4), eight);
          hi[s] = vsubq_u8(j % 2 == 0 ? vandq_u8(c, low) : vshrq_n_u8(c, 4), eight);
        }
        store_grad_chunk(lo, hi, out, k);
      }
    }
  }
}

// pack_grad_tiles for Q6_K: each row's values q - 32 of column block j, interleaved per
// column as above, and the scales d sc of its two halves (scale blocks 2 b, 2 b + 1; d
// converted as tile_scales_neon converts, exact).
void pack_grad_q6k_tiles_neon(const TiledMatrix& m, int64_t rb, int64_t b0, int64_t b1, GradPanel& p) {
  constexpr int64_t kGroups = kGradRowBlock / kTileRows;
  for (int64_t b = b0; b < b1; ++b) {
    const int j = static_cast<int>(b % 8);
    const Q6KColumns columns(j);
    uint8_t* out = p.q.data() + (b - b0) * kGradPanelBlockBytes;
    float* scales = p.rho.data() + (b - b0) * 2 * kGradRowBlock;  // both halves' rows
    for (int64_t gi = 0; gi < kGroups; ++gi) {
      const int64_t g = rb * kGroups + gi;
      const int64_t nr = g * kTileRows < m.rows ? m.group_rows(g) : 0;
      const uint8_t* tile = nr > 0 ? m.tile(g, b / 8) : nullptr;
      for (int64_t i = 0; i < kTileRows; ++i) {
        float s0 = 0.0f, s1 = 0.0f;
        if (i < nr) {
          const uint8_t* block = tile + static_cast<size_t>(i) * m.block_bytes;
          const float d = tile_scale_neon(block + kQ6KScaleOffset, 0);
          s0 = d * static_cast<float>(q6k_scale(block, 2 * j));
          s1 = d * static_cast<float>(q6k_scale(block, 2 * j + 1));
        }
        scales[8 * gi + i] = s0;
        scales[kGradRowBlock + 8 * gi + i] = s1;
      }
      for (int64_t k = 2 * gi; k < 2 * gi + 2; ++k) {  // chunk k: rows 4k .. 4k+3 of the row block
        const int64_t i0 = 4 * (k - 2 * gi);
        uint8x16_t lo[4], hi[4];  // columns 0..15 and 16..31 of the 4 rows, as signed values
        for (int64_t s = 0; s < 4; ++s) {
          if (i0 + s >= nr) {  // a padded row: value 0
            lo[s] = hi[s] = vdupq_n_u8(0);
            continue;
          }
          const uint8_t* block = tile + static_cast<size_t>(i0 + s) * m.block_bytes;
          lo[s] = columns.values(block, 0);
          hi[s] = columns.values(block, 16);
        }
        store_grad_chunk(lo, hi, out, k);
      }
    }
  }
}

void pack_grad_tiles_neon(const TiledMatrix& m, int64_t rb, int64_t b0, int64_t b1, GradPanel& p) {
  const bool q4 = m.type == QType::Q4_0, full = (rb + 1) * kGradRowBlock <= m.rows;
  p.kind = int8_has_offsets(m.type)  ? kquant_kind(m.type)
           : m.type == QType::Q6_K ? Int8Kind::Signed6
                                   : legacy_tile_kind(m);
  p.resize(b1 - b0, int8_grad_parts(m.type));
  if (m.type == QType::Q4_K || m.type == QType::Q5_K)
    pack_grad_kquant_tiles_neon(m, rb, b0, b1, p);
  else if (m.type == QType::Q6_K)
    pack_grad_q6k_tiles_neon(m, rb, b0, b1, p);
  else if (q4)
    full ? pack_grad_tiles_kind_neon<true, true>(m, rb, b0, b1, p)
         : pack_grad_tiles_kind_neon<true, false>(m, rb, b0, b1, p);
  else
    full ? pack_grad_tiles_kind_neon<false, true>(m, rb, b0, b1, p)
         : pack_grad_tiles_kind_neon<false, false>(m, rb, b0, b1, p);
  normalize_grad_scales_neon(p);
}

// add_forward_offsets (kernels_int8.h): a row group's 8 rows in two vectors, fused
// multiply-adds (vfmaq_f32) in the definition's order.
void add_forward_offsets_neon(const float* z, int64_t ldz, int64_t nt, const ForwardPanel* const* p, int64_t np,
                              int64_t nr_last, float* Y, int64_t ldy) {
  for (int64_t g = 0; g < np; ++g) {
    const int64_t nr = g == np - 1 ? nr_last : 8;
    const float* off = p[g]->offset.data();
    for (int64_t t = 0; t < nt; ++t) {
      float32x4_t a0 = vdupq_n_f32(0.0f), a1 = vdupq_n_f32(0.0f);
      for (int64_t b = 0; b < p[g]->blocks; ++b) {
        const float32x4_t zz = vdupq_n_f32(z[t * ldz + b]);
        a0 = vfmaq_f32(a0, vld1q_f32(off + b * 8), zz);
        a1 = vfmaq_f32(a1, vld1q_f32(off + b * 8 + 4), zz);
      }
      float tmp[8];
      vst1q_f32(tmp, a0);
      vst1q_f32(tmp + 4, a1);
      for (int64_t i = 0; i < nr; ++i) Y[t * ldy + 8 * g + i] += tmp[i];
    }
  }
}

// grad_offset_sums (kernels_int8.h): 4 blocks per vector, four vectors' chains at once.
void grad_offset_sums_neon(const float* dY, int64_t ldy, int64_t nt, int64_t nrows, const float* C, int64_t ldc,
                           int64_t nb, float* G, int64_t ldg) {
  for (int64_t t = 0; t < nt; ++t) {
    float* g = G + t * ldg;
    const float* y = dY + t * ldy;
    for (int64_t b = 0; b < nb; b += 16) {
      const int n = static_cast<int>(std::min<int64_t>(4, (nb - b) / 4));
      float32x4_t acc[4];
      for (int k = 0; k < n; ++k) acc[k] = vld1q_f32(g + b + 4 * k);
      for (int64_t r = 0; r < nrows; ++r) {
        const float32x4_t v = vdupq_n_f32(y[r]);
        for (int k = 0; k < n; ++k) acc[k] = vfmaq_f32(acc[k], vld1q_f32(C + r * ldc + b + 4 * k), v);
      }
      for (int k = 0; k < n; ++k) vst1q_f32(g + b + 4 * k, acc[k]);
    }
  }
}

void spread_grad_offsets_neon(const float* G, int64_t ldg, int64_t nt, int64_t nb, float* dX, int64_t ldx) {
  for (int64_t t = 0; t < nt; ++t)
    for (int64_t b = 0; b < nb; ++b) {
      const float32x4_t g = vdupq_n_f32(G[t * ldg + b]);
      float* x = dX + t * ldx + b * kQ8Block;
      for (int k = 0; k < 8; ++k) vst1q_f32(x + 4 * k, vaddq_f32(vld1q_f32(x + 4 * k), g));
    }
}

// The set, named isa.
inline Int8Kernels neon_int8_kernels(const char* isa) {
  return {isa,
          quantize_row_neon,
          pack_forward_tiles_neon,
          pack_grad_tiles_neon,
          forward_neon,
          forward_pair_by_calls<forward_neon>,
          grad_rows_neon,
          input_grad_neon,
          nullptr,
          add_forward_offsets_neon,
          grad_offset_sums_neon,
          spread_grad_offsets_neon};
}

}  // namespace
}  // namespace nl::engine
