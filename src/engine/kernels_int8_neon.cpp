// NEON int8 kernels for arm64 (layouts and arithmetic: kernels_int8.h). Two dot products:
//  - sdot (vdotq_laneq_s32, the dot-product extension of ARMv8.2+, on most phones since
//    2018): one instruction multiplies a 4-byte chunk of the activations, selected by lane,
//    with 4 bytes of 4 panel lanes and adds into 4 int32;
//  - without it, vmull_s8 + vpadalq_s16 (widening multiply, pairwise accumulate).
// Both read the same panels. In forward panels Q4_0 nibbles (0..15) are valid signed bytes,
// so the nibble offset is the same "- 8 * sum q" as on AVX2; input-gradient panels hold the
// values u - 8 (signed), which need no offset. As on AVX2, the products go 4 tokens at a
// time, so each weight chunk is loaded once per 4 tokens. The tile packers move 4-byte chunks (forward)
// or interleave four rows' bytes with vst4 (input grad); the float packers quantize with
// quantize_row_neon.
#include "kernels_int8.h"

#if defined(__aarch64__)
#include <arm_neon.h>
#include <sys/auxv.h>

#include <cstring>

#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20)
#endif

namespace nl::engine {
namespace {

void quantize_block_neon(const float* v, int8_t* q, float* d, int32_t* sum) {
  float32x4_t x[8];
  float32x4_t m = vdupq_n_f32(0.0f);
  for (int i = 0; i < 8; ++i) {
    x[i] = vld1q_f32(v + 4 * i);
    m = vmaxq_f32(m, vabsq_f32(x[i]));
  }
  const float amax = vmaxvq_f32(m);
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
// NT tokens' activation blocks (token t's 32 int8 at x + t * ldx): lanes 0..3 of token t in
// lo[t], 4..7 in hi[t]. Each weight chunk is loaded once for the NT tokens.
#if defined(__ARM_FEATURE_DOTPROD)
template <int NT>
inline void dot_tokens_sdot(const uint8_t* w, const int8_t* x, int64_t ldx, int32x4_t lo[NT], int32x4_t hi[NT]) {
  int8x16_t x0[NT], x1[NT];
  for (int t = 0; t < NT; ++t) {
    x0[t] = vld1q_s8(x + t * ldx);
    x1[t] = vld1q_s8(x + t * ldx + 16);
    lo[t] = hi[t] = vdupq_n_s32(0);
  }
  // The lane of vdotq_laneq_s32 must be a constant: chunk c is lane c % 4 of x0 or x1.
#define NL_SDOT_CHUNK(c, xv, lane)                                        \
  {                                                                       \
    const int8x16_t wa = vreinterpretq_s8_u8(vld1q_u8(w + (c) * 32));     \
    const int8x16_t wb = vreinterpretq_s8_u8(vld1q_u8(w + (c) * 32 + 16)); \
    for (int t = 0; t < NT; ++t) {                                        \
      lo[t] = vdotq_laneq_s32(lo[t], wa, xv[t], lane);                    \
      hi[t] = vdotq_laneq_s32(hi[t], wb, xv[t], lane);                    \
    }                                                                     \
  }
  NL_SDOT_CHUNK(0, x0, 0)
  NL_SDOT_CHUNK(1, x0, 1)
  NL_SDOT_CHUNK(2, x0, 2)
  NL_SDOT_CHUNK(3, x0, 3)
  NL_SDOT_CHUNK(4, x1, 0)
  NL_SDOT_CHUNK(5, x1, 1)
  NL_SDOT_CHUNK(6, x1, 2)
  NL_SDOT_CHUNK(7, x1, 3)
#undef NL_SDOT_CHUNK
}
#endif

template <int NT>
inline void dot_tokens_widening(const uint8_t* w, const int8_t* x, int64_t ldx, int32x4_t lo[NT], int32x4_t hi[NT]) {
  int32x4_t acc[NT][4];
  for (int t = 0; t < NT; ++t)
    for (int k = 0; k < 4; ++k) acc[t][k] = vdupq_n_s32(0);
  for (int c = 0; c < 8; ++c) {
    const int8x16_t w0 = vreinterpretq_s8_u8(vld1q_u8(w + c * 32)), w1 = vreinterpretq_s8_u8(vld1q_u8(w + c * 32 + 16));
    for (int t = 0; t < NT; ++t) {
      int32_t chunk;
      std::memcpy(&chunk, x + t * ldx + 4 * c, 4);
      const int8x8_t xc = vreinterpret_s8_s32(vdup_n_s32(chunk));
      // Lanes of acc[t][k]: [lane 2k: two pair sums][lane 2k+1: two pair sums].
      acc[t][0] = vpadalq_s16(acc[t][0], vmull_s8(vget_low_s8(w0), xc));
      acc[t][1] = vpadalq_s16(acc[t][1], vmull_s8(vget_high_s8(w0), xc));
      acc[t][2] = vpadalq_s16(acc[t][2], vmull_s8(vget_low_s8(w1), xc));
      acc[t][3] = vpadalq_s16(acc[t][3], vmull_s8(vget_high_s8(w1), xc));
    }
  }
  for (int t = 0; t < NT; ++t) {
    lo[t] = vpaddq_s32(acc[t][0], acc[t][1]);
    hi[t] = vpaddq_s32(acc[t][2], acc[t][3]);
  }
}

template <bool Dot, int NT>
inline void dot_tokens(const uint8_t* w, const int8_t* x, int64_t ldx, int32x4_t lo[NT], int32x4_t hi[NT]) {
#if defined(__ARM_FEATURE_DOTPROD)
  if constexpr (Dot) {
    dot_tokens_sdot<NT>(w, x, ldx, lo, hi);
    return;
  }
#endif
  dot_tokens_widening<NT>(w, x, ldx, lo, hi);
}

// Runs kernel<NT>(t, NT) over nt tokens in blocks of 4, then one at a time.
template <class F>
inline void token_blocks(int64_t nt, F&& kernel) {
  int64_t t = 0;
  for (; t + 4 <= nt; t += 4) kernel.template operator()<4>(t);
  for (; t < nt; ++t) kernel.template operator()<1>(t);
}

template <bool Dot>
void forward_neon(const int8_t* q, const float* d, const int32_t* sum, int64_t ldq, int64_t nt, const ForwardPanel& p,
                  int64_t nr, float* Y, int64_t ldy) {
  const int64_t blocks = ldq / kQ8Block;
  const bool nibble = p.kind == Int8Kind::Nibble;
  token_blocks(nt, [&]<int NT>(int64_t t0) {
    float32x4_t acc_lo[NT], acc_hi[NT];
    for (int t = 0; t < NT; ++t) acc_lo[t] = acc_hi[t] = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < p.blocks; ++b) {
      int32x4_t lo[NT], hi[NT];
      dot_tokens<Dot, NT>(p.q.data() + b * 256, q + t0 * ldq + b * kQ8Block, ldq, lo, hi);
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

// grad_rows (kernels_int8.h) with the scalar's arithmetic (the max is exact in any order;
// vcvtnq rounds half to even; a value past int16, only ever a NaN or an infinity, is
// -32768 as the definition has it); the tail block goes through the scalar definition.
void grad_rows_neon(const float* g, int64_t n, float* ey, int16_t* y, int64_t ldb) {
  int64_t R = 0;
  for (; (R + 1) * kGradRowBlock <= n; ++R) {
    const float* x = g + R * kGradRowBlock;
    float32x4_t m = vdupq_n_f32(0.0f);
    for (int i = 0; i < 8; ++i) m = vmaxq_f32(m, vabsq_f32(vld1q_f32(x + 4 * i)));
    ey[R] = vmaxvq_f32(m) / 127.0f;
    const float inv = ey[R] != 0.0f ? 1.0f / ey[R] : 0.0f;
    for (int i = 0; i < 8; ++i) {
      const float32x4_t v = vmulq_n_f32(vmulq_n_f32(vld1q_f32(x + 4 * i), inv), 256.0f);
      const int32x4_t r = vbslq_s32(vcaleq_f32(v, vdupq_n_f32(32767.0f)), vcvtnq_s32_f32(v), vdupq_n_s32(-32768));
      vst1_s16(y + R * ldb + 4 * i, vqmovn_s32(r));
    }
  }
  if (R * kGradRowBlock < n)
    int8_kernels_scalar().grad_rows(g + R * kGradRowBlock, n - R * kGradRowBlock, ey + R, y + R * ldb, ldb);
}

// q[r] = requantize_grad_value(y16[r], rho16[r]) for a row block's 32 values: vqrdmulh is
// round(a b / 2^15) (it saturates only for -32768 x -32768), then a saturating narrow.
inline void requantize_rows_neon(const int16_t* y16, const int16_t* rho16, int8_t* q) {
  const int16x8_t k256 = vdupq_n_s16(256);
  for (int i = 0; i < 4; ++i) {
    const int16x8_t u = vqrdmulhq_s16(vld1q_s16(y16 + 8 * i), vld1q_s16(rho16 + 8 * i));
    vst1_s8(q + 8 * i, vqmovn_s16(vqrdmulhq_s16(u, k256)));
  }
}

template <bool Dot>
void input_grad_neon(const int16_t* Y, int64_t ldg, const float* ey, int64_t lds, int64_t nt, const GradPanel& p,
                     int64_t n, const GradOut& out) {
  token_blocks(nt, [&]<int NT>(int64_t t0) {
    int8_t qv[NT][kGradRowBlock];
    float e[NT];
    for (int64_t b = 0; b < p.blocks; ++b) {
      for (int t = 0; t < NT; ++t) {  // dY with W's scales folded in, requantized per token
        requantize_rows_neon(Y + (t0 + t) * ldg, p.rho16.data() + b * kGradRowBlock, qv[t]);
        e[t] = ey[(t0 + t) * lds] * p.m[static_cast<size_t>(b)];
      }
      for (int64_t cg = 0; cg < 4; ++cg) {
        const int64_t c0 = b * kQ8Block + cg * 8;
        if (c0 >= n) break;
        int32x4_t lo[NT], hi[NT];
        dot_tokens<Dot, NT>(p.q.data() + b * 1024 + cg * 256, qv[0], kGradRowBlock, lo, hi);
        const int64_t nc = n - c0 < 8 ? n - c0 : 8;
        for (int t = 0; t < NT; ++t) {  // (the panel holds signed weight values, Q4_0's too)
          const GradOut o = out.from_token(t0 + t);
          float tmp[8] = {};
          if (o.acc) std::memcpy(tmp, o.acc + c0, static_cast<size_t>(nc) * sizeof(float));
          vst1q_f32(tmp, vfmaq_n_f32(vld1q_f32(tmp), vcvtq_f32_s32(lo[t]), e[t]));
          vst1q_f32(tmp + 4, vfmaq_n_f32(vld1q_f32(tmp + 4), vcvtq_f32_s32(hi[t]), e[t]));
          std::memcpy(o.D + c0, tmp, static_cast<size_t>(nc) * sizeof(float));
        }
      }
    }
  });
}

bool cpu_has_dotprod() {
#if defined(__ARM_FEATURE_DOTPROD)
  return (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
#else
  return false;
#endif
}

float tile_scale_neon(const uint8_t* tile, int64_t i) {
  __fp16 h;
  std::memcpy(&h, tile + i * 2, 2);
  return static_cast<float>(h);  // exact, subnormals included
}

// Row i's 32 panel bytes of one Q4_0/Q8_0 tile block: unsigned nibbles (low ones are
// columns 0..15, high ones 16..31) or the Q8_0 bytes.
inline void tile_row_bytes(const TiledMatrix& m, const uint8_t* tile, int64_t nr, int64_t i, uint8x16_t& lo,
                           uint8x16_t& hi) {
  const size_t quant_bytes = m.block_bytes - sizeof(uint16_t);
  const uint8_t* q = tile + static_cast<size_t>(nr) * sizeof(uint16_t) + static_cast<size_t>(i) * quant_bytes;
  if (m.type == QType::Q4_0) {
    const uint8x16_t raw = vld1q_u8(q);
    lo = vandq_u8(raw, vdupq_n_u8(0x0F));
    hi = vshrq_n_u8(raw, 4);
  } else {
    lo = vld1q_u8(q);
    hi = vld1q_u8(q + 16);
  }
}

void pack_forward_tiles_neon(const TiledMatrix& m, int64_t g, ForwardPanel& p) {
  const int64_t nr = m.group_rows(g), nb = m.n_blocks();
  p.kind = m.type == QType::Q4_0 ? Int8Kind::Nibble : Int8Kind::Signed;
  p.resize(nb);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* tile = m.tile(g, b);
    uint8_t* out = p.q.data() + b * 256;
    for (int64_t i = 0; i < 8; ++i) {
      p.d[static_cast<size_t>(b * 8 + i)] = i < nr ? tile_scale_neon(tile, i) : 0.0f;
      uint32x4_t c[2] = {vdupq_n_u32(0), vdupq_n_u32(0)};  // chunks 0..3 and 4..7 of row i
      if (i < nr) {
        uint8x16_t lo, hi;
        tile_row_bytes(m, tile, nr, i, lo, hi);
        c[0] = vreinterpretq_u32_u8(lo);
        c[1] = vreinterpretq_u32_u8(hi);
      }
      // Chunk k of row i goes to out + 32 k + 4 i.
      for (int half = 0; half < 2; ++half) {
        vst1q_lane_u32(reinterpret_cast<uint32_t*>(out + (4 * half + 0) * 32 + 4 * i), c[half], 0);
        vst1q_lane_u32(reinterpret_cast<uint32_t*>(out + (4 * half + 1) * 32 + 4 * i), c[half], 1);
        vst1q_lane_u32(reinterpret_cast<uint32_t*>(out + (4 * half + 2) * 32 + 4 * i), c[half], 2);
        vst1q_lane_u32(reinterpret_cast<uint32_t*>(out + (4 * half + 3) * 32 + 4 * i), c[half], 3);
      }
    }
  }
  if (p.kind == Int8Kind::Signed) forward_weight_sums(p);
}

void pack_grad_tiles_neon(const TiledMatrix& m, int64_t rb, int64_t b0, int64_t b1, GradPanel& p) {
  p.kind = m.type == QType::Q4_0 ? Int8Kind::Nibble : Int8Kind::Signed;
  p.resize(b1 - b0);
  for (int64_t b = b0; b < b1; ++b) {
    uint8_t* out = p.q.data() + (b - b0) * 1024;
    float* scales = p.rho.data() + (b - b0) * 32;
    for (int64_t k = 0; k < 8; ++k) {  // chunk k: rows 4k .. 4k+3 of the row block
      uint8x16_t lo[4], hi[4];
      for (int64_t s = 0; s < 4; ++s) {
        const int64_t row = rb * kGradRowBlock + 4 * k + s;
        lo[s] = hi[s] = vdupq_n_u8(0);
        scales[4 * k + s] = 0.0f;
        if (row >= m.rows) continue;
        const int64_t g = row / kTileRows, i = row % kTileRows;
        const uint8_t* tile = m.tile(g, b);
        scales[4 * k + s] = tile_scale_neon(tile, i);
        tile_row_bytes(m, tile, m.group_rows(g), i, lo[s], hi[s]);
        if (p.kind == Int8Kind::Nibble) {  // the values u - 8, as signed bytes
          lo[s] = vsubq_u8(lo[s], vdupq_n_u8(8));
          hi[s] = vsubq_u8(hi[s], vdupq_n_u8(8));
        }
      }
      // Column group cg (8 columns): the four rows' bytes interleaved per column.
      for (int cg = 0; cg < 4; ++cg) {
        const uint8x16_t* src = cg < 2 ? lo : hi;
        const bool upper = cg % 2 == 1;
        uint8x8x4_t v;
        v.val[0] = upper ? vget_high_u8(src[0]) : vget_low_u8(src[0]);
        v.val[1] = upper ? vget_high_u8(src[1]) : vget_low_u8(src[1]);
        v.val[2] = upper ? vget_high_u8(src[2]) : vget_low_u8(src[2]);
        v.val[3] = upper ? vget_high_u8(src[3]) : vget_low_u8(src[3]);
        vst4_u8(out + (cg * 8 + k) * 32, v);
      }
    }
  }
  normalize_grad_scales(p);
}

void pack_forward_floats_neon(const float* P, int64_t ldp, int64_t nr, int64_t n, ForwardPanel& p) {
  pack_forward_floats_using(quantize_row_neon, P, ldp, nr, n, p);
}
void pack_grad_floats_neon(const float* P, int64_t ldp, int64_t nrows, int64_t n, GradPanel& p) {
  pack_grad_floats_using(quantize_row_neon, P, ldp, nrows, n, p);
}

}  // namespace

const Int8Kernels* int8_kernels_neon_widening() {
  static const Int8Kernels k{"neon",
                             quantize_row_neon,
                             pack_forward_tiles_neon,
                             pack_grad_tiles_neon,
                             pack_forward_floats_neon,
                             pack_grad_floats_neon,
                             forward_neon<false>,
                             forward_pair_by_calls<forward_neon<false>>,
                             grad_rows_neon,
                             input_grad_neon<false>};
  return &k;
}

const Int8Kernels* int8_kernels_neon() {
  static const Int8Kernels k{"neon-dotprod",
                             quantize_row_neon,
                             pack_forward_tiles_neon,
                             pack_grad_tiles_neon,
                             pack_forward_floats_neon,
                             pack_grad_floats_neon,
                             forward_neon<true>,
                             forward_pair_by_calls<forward_neon<true>>,
                             grad_rows_neon,
                             input_grad_neon<true>};
  static const bool dot = cpu_has_dotprod();
  return dot ? &k : int8_kernels_neon_widening();
}

}  // namespace nl::engine

#else

namespace nl::engine {
const Int8Kernels* int8_kernels_neon() { return nullptr; }
const Int8Kernels* int8_kernels_neon_widening() { return nullptr; }
}  // namespace nl::engine

#endif
