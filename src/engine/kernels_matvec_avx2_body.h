// The AVX2 matrix-vector kernels (kernels_matvec.h), compiled twice: by
// kernels_matvec_avx2.cpp for AVX2 + FMA + F16C (NL_MATVEC_VNNI 0: vpmaddubsw, vpmaddwd)
// and by kernels_matvec_avx2_vnni.cpp with AVX-VNNI (NL_MATVEC_VNNI 1: vpdpbusd). The
// including file sets the target pragma; everything here has internal linkage.
//
// One row group (8 rows) at a time, every block of it: a Q4_0 tile is 8 scales and 8 rows
// of 16 bytes, so one 32-byte load holds two rows, whose low and high nibbles (columns 0-15
// and 16-31 of each) multiply the token's activations broadcast per half; a Q8_0 tile's
// rows are one 32-byte load each (signed x signed by the sign trick: |w| x sign(x, w)).
// The per-row integer sums are reduced across lanes with vphaddd into one vector of the 8
// rows, so the scale step is the definition's, lane by lane: acc = fma(float(isum),
// dw * dx, acc). Q4_0's unsigned nibbles u give sum u x - 8 sum x (sum x from the quantizer).
// Up to 4 tokens share each tile's loads and nibble unpacking.
#pragma once
#include <immintrin.h>

#include <algorithm>

#include "kernels.h"
#include "kernels_int8.h"
#include "kernels_matvec.h"

#ifndef NL_MATVEC_VNNI
#error "define NL_MATVEC_VNNI (0 or 1) and the target pragma before including kernels_matvec_avx2_body.h"
#endif

namespace nl::engine {
namespace {

// Sums of 4 products of unsigned bytes u and signed bytes s per int32 lane, added to acc.
inline __m256i dot_u8s8(__m256i acc, __m256i u, __m256i s) {
#if NL_MATVEC_VNNI
  return _mm256_dpbusd_avx_epi32(acc, u, s);
#else
  return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
#endif
}

// Four vectors of [row 2k: 4 partial sums | row 2k+1: 4 partial sums] to the 8 row sums.
inline __m256i reduce_row_pairs(__m256i v0, __m256i v1, __m256i v2, __m256i v3) {
  const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(v0, v1), _mm256_hadd_epi32(v2, v3));  // r0 r2 r4 r6 | r1 r3 r5 r7
  return _mm256_permutevar8x32_epi32(h, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// Eight vectors of one row's 8 partial sums each to the 8 row sums.
inline __m256i reduce_rows(const __m256i v[8]) {
  const __m256i a = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));  // r0-3 | r0-3
  const __m256i b = _mm256_hadd_epi32(_mm256_hadd_epi32(v[4], v[5]), _mm256_hadd_epi32(v[6], v[7]));  // r4-7 | r4-7
  return _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20), _mm256_permute2x128_si256(a, b, 0x31));
}

// A group's tiles are one run of memory, read once per token: each kernel asks for the bytes
// kPrefetchBytes past the tile it starts (prefetch_ahead). Measured on Zen 3 (llama-3.2-1b,
// 2 threads, decode): without it a third of the Q4_K kernel's samples waited on the first
// load of a tile.
inline constexpr size_t kPrefetchBytes = 8192;

inline __m256 tile_scales(const uint8_t* tile) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(tile)));
}

template <int NT>
void q4_0_group(const TiledMatrix& m, int64_t g, const int8_t* q, const float* d, const int32_t* sum, float* Y,
                int64_t ldy) {
  const int64_t nb = m.n_blocks();
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  __m256 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
  const uint8_t* tile = m.tile(g, 0);  // a full group's tiles follow one another
  for (int64_t b = 0; b < nb; ++b, tile += 8 * 18) {
    prefetch_ahead(tile, kPrefetchBytes, 8 * 18);
    const __m256 dw = tile_scales(tile);
    __m256i lo[4], hi[4];
    for (int k = 0; k < 4; ++k) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(tile + 16 + 32 * k));
      lo[k] = _mm256_and_si256(v, low4);
      hi[k] = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
    }
    for (int t = 0; t < NT; ++t) {
      const int8_t* x = q + (t * nb + b) * 32;
      const __m256i xlo = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x)));
      const __m256i xhi = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + 16)));
      __m256i s[4];
#if NL_MATVEC_VNNI
      for (int k = 0; k < 4; ++k) s[k] = dot_u8s8(dot_u8s8(_mm256_setzero_si256(), lo[k], xlo), hi[k], xhi);
#else
      // |u x| <= 15 x 128, so the two halves' pair sums add up in int16 before widening.
      for (int k = 0; k < 4; ++k)
        s[k] = _mm256_madd_epi16(
            _mm256_add_epi16(_mm256_maddubs_epi16(lo[k], xlo), _mm256_maddubs_epi16(hi[k], xhi)),
            _mm256_set1_epi16(1));
#endif
      const __m256i isum =
          _mm256_sub_epi32(reduce_row_pairs(s[0], s[1], s[2], s[3]), _mm256_set1_epi32(8 * sum[t * nb + b]));
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(dw, _mm256_set1_ps(d[t * nb + b])), acc[t]);
    }
  }
  for (int t = 0; t < NT; ++t) _mm256_storeu_ps(Y + t * ldy + g * 8, acc[t]);
}

template <int NT>
void q8_0_group(const TiledMatrix& m, int64_t g, const int8_t* q, const float* d, float* Y, int64_t ldy) {
  const int64_t nb = m.n_blocks();
  __m256 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
  const uint8_t* tile = m.tile(g, 0);
  for (int64_t b = 0; b < nb; ++b, tile += 8 * 34) {
    prefetch_ahead(tile, kPrefetchBytes, 8 * 34);
    const __m256 dw = tile_scales(tile);
    __m256i w[8], aw[8];
    for (int i = 0; i < 8; ++i) {
      w[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(tile + 16 + 32 * i));
      aw[i] = _mm256_abs_epi8(w[i]);
    }
    for (int t = 0; t < NT; ++t) {
      const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + (t * nb + b) * 32));
      __m256i s[8];
      for (int i = 0; i < 8; ++i) s[i] = dot_u8s8(_mm256_setzero_si256(), aw[i], _mm256_sign_epi8(x, w[i]));
      const __m256i isum = reduce_rows(s);
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(dw, _mm256_set1_ps(d[t * nb + b])), acc[t]);
    }
  }
  for (int t = 0; t < NT; ++t) _mm256_storeu_ps(Y + t * ldy + g * 8, acc[t]);
}

// (A function, not a lambda: GCC compiles a lambda without the including file's target
// pragma, -Wpsabi.)
inline __m256i load32(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

// The quants u of 32-value block j (of 8) of one row's K-quant block, unsigned: Q4_K's
// nibbles (value u - 8), Q5_K's 5 bits (u - 16), Q6_K's 6 bits (u - 32); the bits of
// kernels_int8.h's q5k_quant and q6k_quant.
template <QType kType>
inline __m256i kquant_quants(const uint8_t* block, int j) {
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  if constexpr (kType == QType::Q6_K) {
    const int n = j / 4, quarter = j % 4;
    const __m256i ql = load32(block + 64 * n + 32 * (quarter & 1)), qh = load32(block + kQ6KHighBitsOffset + 32 * n);
    const __m256i nib = _mm256_and_si256(quarter < 2 ? ql : _mm256_srli_epi16(ql, 4), low4);
    const __m256i pair = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * quarter)), _mm256_set1_epi8(3));
    return _mm256_or_si256(nib, _mm256_slli_epi16(pair, 4));
  } else {
    const size_t quants = kType == QType::Q5_K ? kQ5KQuantsOffset : kQ4KQuantsOffset;
    const __m256i raw = load32(block + quants + 32 * (j / 2));
    const __m256i nib = _mm256_and_si256(j % 2 == 0 ? raw : _mm256_srli_epi16(raw, 4), low4);
    if constexpr (kType == QType::Q4_K) return nib;
    const __m256i bit = _mm256_and_si256(_mm256_srl_epi16(load32(block + kQ5KHighBitsOffset), _mm_cvtsi32_si128(j)),
                                         _mm256_set1_epi8(1));
    return _mm256_or_si256(nib, _mm256_slli_epi16(bit, 4));
  }
}

// The 8 halves in the low 16 bits of v's lanes as floats.
inline __m256 low_halves(__m256i v) {
  const __m256i lo = _mm256_and_si256(v, _mm256_set1_epi32(0xFFFF));
  return _mm256_cvtph_ps(_mm256_castsi256_si128(_mm256_permute4x64_epi64(_mm256_packus_epi32(lo, lo), 0x08)));
}

// kquant_block_scales (kernels_int8.h) for the 8 rows of a Q4_K/Q5_K tile at once, row i's
// block at tile + i * stride: s[j] and c[j] hold sub-block j's scales and offsets of the 8
// rows. The same unpacking per 32-bit word and the same products (exact), so the same floats.
inline void kquant_scales8(const uint8_t* tile, int stride, float mid, __m256 s[8], __m256 c[8]) {
  const __m256i at = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(stride));
  const auto word = [&](int offset) {
    return _mm256_i32gather_epi32(reinterpret_cast<const int*>(tile + offset), at, 1);
  };
  const __m256i dm = word(0), u0 = word(4), u1 = word(8), u2 = word(12);
  const __m256 d = low_halves(dm), dmin = low_halves(_mm256_srli_epi32(dm, 16));
  const __m256i six = _mm256_set1_epi32(0x3f3f3f3f), four = _mm256_set1_epi32(0x0f0f0f0f),
                top = _mm256_set1_epi32(0x30303030), byte = _mm256_set1_epi32(0xFF);
  const __m256i sc[2] = {_mm256_and_si256(u0, six),
                         _mm256_or_si256(_mm256_and_si256(u2, four), _mm256_and_si256(_mm256_srli_epi32(u0, 2), top))};
  const __m256i mn[2] = {_mm256_and_si256(u1, six), _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(u2, 4), four),
                                                                    _mm256_and_si256(_mm256_srli_epi32(u1, 2), top))};
  const __m256 vmid = _mm256_set1_ps(mid);
  for (int j = 0; j < 8; ++j) {
    const __m128i shift = _mm_cvtsi32_si128(8 * (j % 4));
    const __m256 scf = _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srl_epi32(sc[j / 4], shift), byte));
    const __m256 mnf = _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srl_epi32(mn[j / 4], shift), byte));
    s[j] = _mm256_mul_ps(d, scf);
    c[j] = _mm256_sub_ps(_mm256_mul_ps(vmid, s[j]), _mm256_mul_ps(dmin, mnf));
  }
}

// A K-quant row group (8 rows), NT tokens: per 32-value block each row's unsigned quants u
// (kquant_quants) times the token's activations (vpmaddubsw: |u x| <= 63 x 128, no
// saturation), the rows' sums reduced across lanes, less the unsigned quants' offset.
// Q4_K, Q5_K: vpmaddwd by ones, then less mid x the block's activation sum (8, 16: the
// quantizer's sum). Q6_K: the int16 pairs less those of 32 x the activations (|(u - 32) x|
// pairs <= 2 x 32 x 128), then vpmaddwd by the integer scales of the block's two halves
// (columns 0-15 are the low int16 pairs, 16-31 the high). Then the definition's chains, lane
// by lane; Q4_K/Q5_K's offsets in a second chain (their factors z), added at the end as the
// panel path adds them.
template <int NT, QType kType>
void kquant_group(const TiledMatrix& m, int64_t g, const int8_t* q, const float* d, const int32_t* sum,
                  const float* z, float* Y, int64_t ldy) {
  constexpr bool kQ6 = kType == QType::Q6_K;
  const int64_t nsb = m.n_blocks(), nb = m.cols / 32;
  const int stride = static_cast<int>(m.block_bytes);
  const __m256i ones16 = _mm256_set1_epi16(1), thirty_two = _mm256_set1_epi8(32);
  __m256 acc[NT], corr[NT];
  for (int t = 0; t < NT; ++t) acc[t] = corr[t] = _mm256_setzero_ps();
  const size_t tile_bytes = 8 * m.block_bytes;
  for (int64_t sb = 0; sb < nsb; ++sb) {
    const uint8_t* tile = m.tile(g, sb);
    prefetch_ahead(tile, kPrefetchBytes, tile_bytes);
    const auto row = [&](int i) { return tile + static_cast<size_t>(i) * m.block_bytes; };
    __m256 s[8], c[8];       // per block j: the 8 rows' scales (Q6_K: d) and offsets
    __m256i sc16[8];         // Q6_K: per row, the even sub-blocks' integer scales as int16, then the odd ones'
    if constexpr (kQ6) {
      // d is the block's last 2 bytes: the high half of the word at 206 (inside the block).
      const __m256i at = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(stride));
      const __m256i words = _mm256_i32gather_epi32(reinterpret_cast<const int*>(tile + kQ6KScaleOffset - 2), at, 1);
      const __m256 dd = low_halves(_mm256_srli_epi32(words, 16));
      for (int j = 0; j < 8; ++j) s[j] = dd;
      for (int i = 0; i < 8; ++i) {
        const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row(i) + kQ6KScalesOffset));
        const __m128i even_odd = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
        sc16[i] = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(bytes, even_odd));
      }
    } else {
      kquant_scales8(tile, stride, kquant_mid(kType), s, c);
    }
    for (int j = 0; j < 8; ++j) {
      const int64_t b = sb * 8 + j;
      __m256i u[8], pairs[8];
      for (int i = 0; i < 8; ++i) {
        u[i] = kquant_quants<kType>(row(i), j);
        if constexpr (kQ6) {  // the scales of sub-blocks 2j (columns 0-15) and 2j + 1, 8 int16 each
          const __m256i element_j = _mm256_set1_epi16(static_cast<int16_t>(2 * j | (2 * j + 1) << 8));
          pairs[i] = _mm256_shuffle_epi8(sc16[i], element_j);
        } else {
          pairs[i] = ones16;
        }
      }
      for (int t = 0; t < NT; ++t) {
        const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + (t * nb + b) * 32));
        __m256i part[8];
        if constexpr (kQ6) {
          const __m256i x32 = _mm256_maddubs_epi16(thirty_two, x);
          for (int i = 0; i < 8; ++i)
            part[i] = _mm256_madd_epi16(_mm256_sub_epi16(_mm256_maddubs_epi16(u[i], x), x32), pairs[i]);
        } else {
          for (int i = 0; i < 8; ++i) part[i] = _mm256_madd_epi16(_mm256_maddubs_epi16(u[i], x), pairs[i]);
        }
        __m256i isum = reduce_rows(part);
        if constexpr (!kQ6) isum = _mm256_sub_epi32(isum, _mm256_set1_epi32((kType == QType::Q5_K ? 16 : 8) * sum[t * nb + b]));
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(s[j], _mm256_set1_ps(d[t * nb + b])), acc[t]);
        if constexpr (!kQ6) corr[t] = _mm256_fmadd_ps(c[j], _mm256_set1_ps(z[t * nb + b]), corr[t]);
      }
    }
  }
  for (int t = 0; t < NT; ++t)
    _mm256_storeu_ps(Y + t * ldy + g * 8, kQ6 ? acc[t] : _mm256_add_ps(acc[t], corr[t]));
}

template <int NT>
void full_group(const TiledMatrix& m, int64_t g, const int8_t* q, const float* d, const int32_t* sum, const float* z,
                float* Y, int64_t ldy) {
  switch (m.type) {
    case QType::Q4_0: return q4_0_group<NT>(m, g, q, d, sum, Y, ldy);
    case QType::Q4_K: return kquant_group<NT, QType::Q4_K>(m, g, q, d, sum, z, Y, ldy);
    case QType::Q5_K: return kquant_group<NT, QType::Q5_K>(m, g, q, d, sum, z, Y, ldy);
    case QType::Q6_K: return kquant_group<NT, QType::Q6_K>(m, g, q, d, sum, z, Y, ldy);
    default: return q8_0_group<NT>(m, g, q, d, Y, ldy);
  }
}

void int8_tiles_avx2(const TiledMatrix& m, int64_t g0, int64_t g1, const int8_t* q, const float* d,
                     const int32_t* sum, const float* z, int64_t nt, float* Y, int64_t ldy) {
  const int64_t nb = m.cols / 32;
  for (int64_t g = g0; g < g1; ++g) {
    if (m.group_rows(g) < 8) {  // a partial last group: its tiles hold fewer rows
      matvec_int8_group_scalar(m, g, q, d, z, nt, Y, ldy);
      continue;
    }
    for (int64_t t = 0; t < nt; t += 4) {
      const float* zt = z ? z + t * nb : nullptr;
      const int8_t* qt = q + t * nb * 32;
      switch (std::min<int64_t>(4, nt - t)) {
        case 4: full_group<4>(m, g, qt, d + t * nb, sum + t * nb, zt, Y + t * ldy, ldy); break;
        case 3: full_group<3>(m, g, qt, d + t * nb, sum + t * nb, zt, Y + t * ldy, ldy); break;
        case 2: full_group<2>(m, g, qt, d + t * nb, sum + t * nb, zt, Y + t * ldy, ldy); break;
        default: full_group<1>(m, g, qt, d + t * nb, sum + t * nb, zt, Y + t * ldy, ldy); break;
      }
    }
  }
}

// ---- f32 mode -------------------------------------------------------------------------

// The 8 rows' bytes of a tile's 16-byte row slices (at p, p + stride, ...) transposed:
// out[k] holds byte columns 2k (low 8 bytes) and 2k + 1 (high 8 bytes), rows 0-7 each.
inline void transpose_bytes_8x16(const uint8_t* p, int64_t stride, __m128i out[8]) {
  __m128i r[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i * stride));
  __m128i a[8], e[8];
  for (int i = 0; i < 4; ++i) {  // row pairs: columns 0-7 and 8-15
    a[2 * i] = _mm_unpacklo_epi8(r[2 * i], r[2 * i + 1]);
    a[2 * i + 1] = _mm_unpackhi_epi8(r[2 * i], r[2 * i + 1]);
  }
  for (int h = 0; h < 2; ++h)  // rows 0-3 (h = 0) and 4-5-6-7 (h = 1): 4 columns per vector
    for (int c = 0; c < 2; ++c) {
      e[4 * h + 2 * c] = _mm_unpacklo_epi16(a[4 * h + c], a[4 * h + 2 + c]);
      e[4 * h + 2 * c + 1] = _mm_unpackhi_epi16(a[4 * h + c], a[4 * h + 2 + c]);
    }
  for (int k = 0; k < 4; ++k) {  // e[k]: rows 0-3 of columns 4k..4k+3; e[4 + k]: rows 4-7
    out[2 * k] = _mm_unpacklo_epi32(e[k], e[4 + k]);
    out[2 * k + 1] = _mm_unpackhi_epi32(e[k], e[4 + k]);
  }
}

// 8 rows of 8 halves (at p, p + stride, ...) transposed: out[c] holds column c's 8 rows.
inline void transpose_halves_8x8(const uint8_t* p, int64_t stride, __m128i out[8]) {
  __m128i r[8], a[8], e[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i * stride));
  for (int i = 0; i < 4; ++i) {  // row pairs: columns 0-3 and 4-7
    a[2 * i] = _mm_unpacklo_epi16(r[2 * i], r[2 * i + 1]);
    a[2 * i + 1] = _mm_unpackhi_epi16(r[2 * i], r[2 * i + 1]);
  }
  for (int h = 0; h < 2; ++h)  // rows 0-3 (h = 0), 4-7 (h = 1): 2 columns per vector
    for (int c = 0; c < 2; ++c) {
      e[4 * h + 2 * c] = _mm_unpacklo_epi32(a[4 * h + c], a[4 * h + 2 + c]);
      e[4 * h + 2 * c + 1] = _mm_unpackhi_epi32(a[4 * h + c], a[4 * h + 2 + c]);
    }
  for (int k = 0; k < 4; ++k) {  // e[k]: rows 0-3 of columns 2k, 2k+1; e[4 + k]: rows 4-7
    out[2 * k] = _mm_unpacklo_epi64(e[k], e[4 + k]);
    out[2 * k + 1] = _mm_unpackhi_epi64(e[k], e[4 + k]);
  }
}

// Tile (g, b) of a Q4_0, Q8_0 or F16 matrix as 32 column vectors of its 8 rows at
// T[32 * 8], with the panel dequantizer's arithmetic: float(q) * d (one multiply) for the
// legacy types, the exact conversion of each half for F16.
inline void dequantize_tile_transposed(const TiledMatrix& m, const uint8_t* tile, float* T) {
  if (m.type == QType::F16) {  // 8 rows of 32 halves
    __m128i cols[8];
    for (int part = 0; part < 4; ++part) {
      transpose_halves_8x8(tile + 16 * part, 64, cols);
      for (int c = 0; c < 8; ++c) _mm256_store_ps(T + 8 * (8 * part + c), _mm256_cvtph_ps(cols[c]));
    }
    return;
  }
  const __m256 d = tile_scales(tile);
  __m128i cols[8];
  if (m.type == QType::Q4_0) {
    transpose_bytes_8x16(tile + 16, 16, cols);
    const __m256i low4 = _mm256_set1_epi32(0x0F), eight = _mm256_set1_epi32(8);
    for (int k = 0; k < 8; ++k)
      for (int half = 0; half < 2; ++half) {
        const int c = 2 * k + half;
        const __m256i u = _mm256_cvtepu8_epi32(half ? _mm_srli_si128(cols[k], 8) : cols[k]);
        const __m256i lo = _mm256_sub_epi32(_mm256_and_si256(u, low4), eight);
        const __m256i hi = _mm256_sub_epi32(_mm256_srli_epi32(u, 4), eight);
        _mm256_store_ps(T + 8 * c, _mm256_mul_ps(_mm256_cvtepi32_ps(lo), d));
        _mm256_store_ps(T + 8 * (c + 16), _mm256_mul_ps(_mm256_cvtepi32_ps(hi), d));
      }
  } else {
    for (int part = 0; part < 2; ++part) {  // columns 0-15, then 16-31
      transpose_bytes_8x16(tile + 16 + 16 * part, 32, cols);
      for (int k = 0; k < 8; ++k)
        for (int half = 0; half < 2; ++half) {
          const int c = 16 * part + 2 * k + half;
          const __m256i q = _mm256_cvtepi8_epi32(half ? _mm_srli_si128(cols[k], 8) : cols[k]);
          _mm256_store_ps(T + 8 * c, _mm256_mul_ps(_mm256_cvtepi32_ps(q), d));
        }
    }
  }
}

// Row groups [g, g + NG) (whole groups), tokens t < nt: the chains of NG groups run side by
// side, so the FMA latency is hidden by independent chains.
template <int NG>
void f32_groups(const TiledMatrix& m, int64_t g, const float* X, int64_t ldx, int64_t nt, float* Y, int64_t ldy) {
  const int64_t nb = m.n_blocks();
  const size_t tile_bytes = 8 * m.block_bytes;
  alignas(32) float T[NG][32 * 8];
  __m256 acc[4][NG];
  for (int64_t t = 0; t < nt; ++t)
    for (int j = 0; j < NG; ++j) acc[t][j] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    for (int j = 0; j < NG; ++j) dequantize_tile_transposed(m, m.tile(g + j, 0) + b * tile_bytes, T[j]);
    for (int64_t t = 0; t < nt; ++t) {
      const float* x = X + t * ldx + b * 32;
      for (int c = 0; c < 32; ++c) {
        const __m256 xb = _mm256_broadcast_ss(x + c);
        for (int j = 0; j < NG; ++j) acc[t][j] = _mm256_fmadd_ps(xb, _mm256_load_ps(T[j] + 8 * c), acc[t][j]);
      }
    }
  }
  for (int64_t t = 0; t < nt; ++t)
    for (int j = 0; j < NG; ++j) _mm256_storeu_ps(Y + t * ldy + (g + j) * 8, acc[t][j]);
}

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

// Other tiled types (the K-quants): row groups [g, g + NG), tokens t < nt, through the panel
// dequantizer itself (`deq`: the AVX2 set's, the very values the panel forward uses) 256
// columns at a time, each 8 x 256 panel transposed to 256 column vectors in L1.
template <int NG>
void f32_groups_dequantized(const TiledMatrix& m, DequantizeTilesFn deq, int64_t g, const float* X, int64_t ldx,
                            int64_t nt, float* Y, int64_t ldy) {
  constexpr int64_t kChunk = 256;
  alignas(32) float P[8 * kChunk];
  alignas(32) float T[NG][kChunk * 8];
  __m256 acc[4][NG];
  for (int64_t t = 0; t < nt; ++t)
    for (int j = 0; j < NG; ++j) acc[t][j] = _mm256_setzero_ps();
  for (int64_t c0 = 0; c0 < m.cols; c0 += kChunk) {
    const int64_t n = std::min(kChunk, m.cols - c0);  // a multiple of the tile's columns
    for (int j = 0; j < NG; ++j) {
      deq(m, g + j, c0, c0 + n, P, n);
      for (int64_t c = 0; c < n; c += 8) {
        __m256 r[8];
        for (int i = 0; i < 8; ++i) r[i] = _mm256_load_ps(P + i * n + c);
        transpose8(r);
        for (int i = 0; i < 8; ++i) _mm256_store_ps(T[j] + 8 * (c + i), r[i]);
      }
    }
    for (int64_t t = 0; t < nt; ++t) {
      const float* x = X + t * ldx + c0;
      for (int64_t c = 0; c < n; ++c) {
        const __m256 xb = _mm256_broadcast_ss(x + c);
        for (int j = 0; j < NG; ++j) acc[t][j] = _mm256_fmadd_ps(xb, _mm256_load_ps(T[j] + 8 * c), acc[t][j]);
      }
    }
  }
  for (int64_t t = 0; t < nt; ++t)
    for (int j = 0; j < NG; ++j) _mm256_storeu_ps(Y + t * ldy + (g + j) * 8, acc[t][j]);
}

void f32_tiles_avx2(const TiledMatrix& m, int64_t g0, int64_t g1, const float* X, int64_t ldx, int64_t nt, float* Y,
                    int64_t ldy) {
  const bool direct = m.type == QType::Q4_0 || m.type == QType::Q8_0 || m.type == QType::F16;
  const DequantizeTilesFn deq = direct ? nullptr : avx2_kernels()->dequantize_tiles;
  for (int64_t t0 = 0; t0 < nt; t0 += 4) {
    const int64_t n = std::min<int64_t>(4, nt - t0);
    int64_t g = g0;
    if (direct) {
      for (; g + 4 <= g1; g += 4) f32_groups<4>(m, g, X + t0 * ldx, ldx, n, Y + t0 * ldy, ldy);
      for (; g < g1; ++g) f32_groups<1>(m, g, X + t0 * ldx, ldx, n, Y + t0 * ldy, ldy);
    } else {
      for (; g + 2 <= g1; g += 2) f32_groups_dequantized<2>(m, deq, g, X + t0 * ldx, ldx, n, Y + t0 * ldy, ldy);
      for (; g < g1; ++g) f32_groups_dequantized<1>(m, deq, g, X + t0 * ldx, ldx, n, Y + t0 * ldy, ldy);
    }
  }
}

}  // namespace
}  // namespace nl::engine
