// The AVX-512 f32 matrix-vector kernel (kernels_matvec.h: f32_tiles), for a decoder's
// one-token products on F16 and K-quant tiles (Q4_K, Q5_K, Q6_K), where the AVX2 one spent
// most of its time transposing and dequantizing, not waiting for memory.
//
// Same definition as the AVX2 panel forward (kernels_avx2.cpp), bit for bit: each output is
// one FMA chain over the columns in order from +0, acc = fma(x[c], w[r][c], acc), with the
// weights w the AVX2 panel dequantizer's values. Only the vector width differs (the order of
// each chain is the definition, the width is not): a zmm holds one column of 16 rows, two
// row groups (tiles g and g+1), so a pair of groups is 16 chains per token in one register.
//
// The work per weight is what this kernel cuts: the tiles are transposed as raw bytes or
// halves (a row group's column, 16 rows, in one vector) before anything is widened, and the
// K-quants are dequantized in that column form, straight from the resident layout:
//   F16:   16 rows x 32 halves by three rounds of 16-bit/32-bit/64-bit unpacks on zmm, then
//          vcvtph2ps (exact), one column of 16 rows per conversion;
//   K:     16 rows x 32 bytes (a Q4_K/Q5_K group's nibbles, Q6_K's ql/qh) by four rounds of
//          unpacks on ymm, then the AVX2 dequantizer's byte-wise formulas on the transposed
//          bytes (they never mix bytes), widened per column; the sub-block scales and mins
//          are the same float products d * sc, dmin * m, one lane per row.
// Q4_0/Q8_0 (the f32 mode of the int8-native types), a lone row group at the end of a range
// and partial groups take the AVX2 kernel (the same bits).
#include "kernels_matvec.h"
#include "cpu_features_x86.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "../quant/blocks.h"

// (blocks.h, before the target pragma: NL_REFERENCE_FUSES_MUL_SUB, whether Q4_K/Q5_K values
// are one fmsub(d1, q, m1) as in the reference dequantizer)
#if defined(__clang__)  // clang ignores GCC target pragmas: the same features, per function
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f,avx512bw,avx512vl")
// GCC 12's AVX-512 intrinsics (unpacks, vcvtph2ps) start from _mm512_undefined_*(), which its
// -Wmaybe-uninitialized reports at every use: a false alarm, nothing here reads such a value.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace nl::engine {
namespace {

constexpr int kMaxTokens = 4;  // tokens per pass over the weights (the engine's matvec limit)

// The accumulators of NP pairs of row groups for nt <= 4 tokens, and the step that adds one
// column to them: acc[t][p] = fma(x[t][c], w, acc[t][p]).
template <int NP>
struct Chains {
  __m512 acc[kMaxTokens][NP];
  const float* x[kMaxTokens];
  int64_t nt;
  Chains(const float* X, int64_t ldx, int64_t n_tokens) : nt(n_tokens) {
    for (int t = 0; t < kMaxTokens; ++t) {
      x[t] = X + (t < nt ? t : 0) * ldx;
      for (int p = 0; p < NP; ++p) acc[t][p] = _mm512_setzero_ps();
    }
  }
  // Column c (absolute) of pair p, its 16 rows' weights in w.
  inline void add(int p, int64_t c, __m512 w) {
    acc[0][p] = _mm512_fmadd_ps(_mm512_set1_ps(x[0][c]), w, acc[0][p]);
    if (nt > 1) acc[1][p] = _mm512_fmadd_ps(_mm512_set1_ps(x[1][c]), w, acc[1][p]);
    if (nt > 2) acc[2][p] = _mm512_fmadd_ps(_mm512_set1_ps(x[2][c]), w, acc[2][p]);
    if (nt > 3) acc[3][p] = _mm512_fmadd_ps(_mm512_set1_ps(x[3][c]), w, acc[3][p]);
  }
  // Pair p covers rows [r0, r0 + 16) of Y.
  void store(int p, int64_t r0, float* Y, int64_t ldy) const {
    for (int64_t t = 0; t < nt; ++t) _mm512_storeu_ps(Y + t * ldy + r0, acc[t][p]);
  }
};

// ---- F16 ------------------------------------------------------------------------------

// Tiles a and b (rows 0-7 each, 32 halves a row, 64 bytes apart) as 32 column vectors of
// 16 halves: col[c] = a's rows 0-7 then b's rows 0-7 of column c.
inline void transpose_f16_pair(const uint8_t* a, const uint8_t* b, __m256i col[32]) {
  // Lanes of 8 halves: [a cols 0-7, b cols 0-7, a cols 8-15, b cols 8-15] (h = 0) and the
  // same for cols 16-31 (h = 1).
  const __m512i lo_idx = _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11);
  const __m512i hi_idx = _mm512_setr_epi64(4, 5, 12, 13, 6, 7, 14, 15);
  __m512i r[2][8];
  for (int i = 0; i < 8; ++i) {
    const __m512i ra = _mm512_loadu_si512(a + 64 * i), rb = _mm512_loadu_si512(b + 64 * i);
    r[0][i] = _mm512_permutex2var_epi64(ra, lo_idx, rb);
    r[1][i] = _mm512_permutex2var_epi64(ra, hi_idx, rb);
  }
  for (int h = 0; h < 2; ++h) {
    __m512i s1[8], s2[8];
    for (int i = 0; i < 4; ++i) {  // row pairs: columns 0-3 and 4-7 of each lane
      s1[2 * i] = _mm512_unpacklo_epi16(r[h][2 * i], r[h][2 * i + 1]);
      s1[2 * i + 1] = _mm512_unpackhi_epi16(r[h][2 * i], r[h][2 * i + 1]);
    }
    for (int q = 0; q < 2; ++q)    // rows 0-3 (q = 0), 4-7 (q = 1): 2 columns per vector
      for (int c = 0; c < 2; ++c) {  // c = 0: columns 0-3, 1: columns 4-7
        s2[4 * q + 2 * c] = _mm512_unpacklo_epi32(s1[4 * q + c], s1[4 * q + 2 + c]);
        s2[4 * q + 2 * c + 1] = _mm512_unpackhi_epi32(s1[4 * q + c], s1[4 * q + 2 + c]);
      }
    for (int k = 0; k < 4; ++k) {  // s2[k]: rows 0-3 of columns 2k, 2k+1; s2[4 + k]: rows 4-7
      const __m512i even = _mm512_unpacklo_epi64(s2[k], s2[4 + k]);  // column 2k
      const __m512i odd = _mm512_unpackhi_epi64(s2[k], s2[4 + k]);   // column 2k + 1
      // Low 256 bits: column j of the lane pair (a, b) of columns 0-7; high: column 8 + j.
      col[16 * h + 2 * k] = _mm512_castsi512_si256(even);
      col[16 * h + 8 + 2 * k] = _mm512_extracti64x4_epi64(even, 1);
      col[16 * h + 2 * k + 1] = _mm512_castsi512_si256(odd);
      col[16 * h + 8 + 2 * k + 1] = _mm512_extracti64x4_epi64(odd, 1);
    }
  }
}

// ---- K-quants ---------------------------------------------------------------------------

// 16 rows of 32 bytes (row i at row(i) + offset) transposed: out[c] holds byte c of the 16
// rows in its low lane and byte 16 + c in its high lane.
template <class RowAt>
inline void transpose_bytes_16x32(RowAt row, size_t offset, __m256i out[16]) {
  __m256i r[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row(i) + offset));
  __m256i s1[16], s2[16], s3[16];
  for (int p = 0; p < 8; ++p) {  // row pairs: bytes 0-7 (s1[p]) and 8-15 (s1[8 + p])
    s1[p] = _mm256_unpacklo_epi8(r[2 * p], r[2 * p + 1]);
    s1[8 + p] = _mm256_unpackhi_epi8(r[2 * p], r[2 * p + 1]);
  }
  for (int q = 0; q < 4; ++q)      // row quads: s2[4 * q + k] holds bytes 4k..4k+3
    for (int h = 0; h < 2; ++h) {  // bytes 0-7 (h = 0), 8-15 (h = 1)
      s2[4 * q + 2 * h] = _mm256_unpacklo_epi16(s1[8 * h + 2 * q], s1[8 * h + 2 * q + 1]);
      s2[4 * q + 2 * h + 1] = _mm256_unpackhi_epi16(s1[8 * h + 2 * q], s1[8 * h + 2 * q + 1]);
    }
  for (int o = 0; o < 2; ++o)      // row octets: s3[8 * o + k] holds bytes 2k, 2k+1
    for (int k = 0; k < 4; ++k) {
      s3[8 * o + 2 * k] = _mm256_unpacklo_epi32(s2[8 * o + k], s2[8 * o + 4 + k]);
      s3[8 * o + 2 * k + 1] = _mm256_unpackhi_epi32(s2[8 * o + k], s2[8 * o + 4 + k]);
    }
  for (int k = 0; k < 8; ++k) {  // all 16 rows
    out[2 * k] = _mm256_unpacklo_epi64(s3[k], s3[8 + k]);
    out[2 * k + 1] = _mm256_unpackhi_epi64(s3[k], s3[8 + k]);
  }
}

// A pair of row groups' super-block b: its 16 rows' blocks, rows 0-7 from tile (g, b) and
// 8-15 from tile (g + 1, b).
struct PairBlocks {
  const uint8_t* a;
  const uint8_t* b;
  size_t block_bytes;
  const uint8_t* operator()(int i) const { return i < 8 ? a + i * block_bytes : b + (i - 8) * block_bytes; }
};

inline __m512 halves_of_rows(const PairBlocks& rows, size_t offset) {
  alignas(32) uint16_t h[16];
  for (int i = 0; i < 16; ++i) std::memcpy(&h[i], rows(i) + offset, 2);
  return _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(h)));
}

// One pair's super-block in column form: the levels of column c (16 rows, one byte each) at
// level + 16 * c, and per scale unit (a sub-block of 32 columns for Q4_K/Q5_K, 16 for Q6_K)
// the 16 rows' scales (and mins) as floats.
struct ColumnBlock {
  alignas(64) uint8_t level[256 * 16];
  alignas(64) float scale[16][16];
  alignas(64) float min[8][16];
};

// Stores transposed byte vector j of 32 columns [c0, c0 + 32): v holds columns c0 + j (low
// lane) and c0 + 16 + j (high lane).
inline void store_column_pair(__m256i v, uint8_t* level, int c0, int j) {
  _mm_store_si128(reinterpret_cast<__m128i*>(level + 16 * (c0 + j)), _mm256_castsi256_si128(v));
  _mm_store_si128(reinterpret_cast<__m128i*>(level + 16 * (c0 + 16 + j)), _mm256_extracti128_si256(v, 1));
}

// Q4_K / Q5_K: levels 0-15 (0-31) and the sub-blocks' d * sc and dmin * m, as the panel
// dequantizer (dequantize_q4k_half / dequantize_q5k_half) computes them. The 6-bit scales
// and mins are unpacked for the 16 rows at once (quant::unpack_scale_min_k4's bit picking on
// the transposed scale bytes), then widened and multiplied: the same float products.
void q4k_q5k_columns(QType type, const PairBlocks& rows, ColumnBlock& cb) {
  const bool q5 = type == QType::Q5_K;
  const size_t scales_at = 4, qh_at = 16, qs_at = q5 ? 48 : 16;
  __m256i packed[16];  // low lanes: scale byte k of the 16 rows (k < 12 are the scales)
  transpose_bytes_16x32(rows, scales_at, packed);
  const auto byte = [&](int k) { return _mm256_castsi256_si128(packed[k]); };
  const __m128i six_bits = _mm_set1_epi8(63), low_nibble = _mm_set1_epi8(0x0F), two_bits = _mm_set1_epi8(3);
  // Bits 6-7 of each byte moved to bits 4-5 (16-bit shifts; the masks keep each byte's own bits).
  const auto top_two_at_4 = [&](__m128i v) {
    return _mm_slli_epi16(_mm_and_si128(_mm_srli_epi16(v, 6), two_bits), 4);
  };
  const __m512 d = halves_of_rows(rows, 0), dmin = halves_of_rows(rows, 2);
  for (int j = 0; j < 8; ++j) {
    __m128i sc, mn;
    if (j < 4) {
      sc = _mm_and_si128(byte(j), six_bits);
      mn = _mm_and_si128(byte(j + 4), six_bits);
    } else {
      sc = _mm_or_si128(_mm_and_si128(byte(j + 4), low_nibble), top_two_at_4(byte(j - 4)));
      mn = _mm_or_si128(_mm_and_si128(_mm_srli_epi16(byte(j + 4), 4), low_nibble), top_two_at_4(byte(j)));
    }
    _mm512_store_ps(cb.scale[j], _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(sc))));
    _mm512_store_ps(cb.min[j], _mm512_mul_ps(dmin, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(mn))));
  }
  const __m256i low4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
  __m256i qh[16];
  if (q5) transpose_bytes_16x32(rows, qh_at, qh);
  for (int g = 0; g < 4; ++g) {  // groups of 64 columns: sub-blocks 2g (low nibbles), 2g + 1
    __m256i raw[16];
    transpose_bytes_16x32(rows, qs_at + 32 * g, raw);
    for (int j = 0; j < 16; ++j) {  // the AVX2 dequantizer's byte-wise formulas
      __m256i lo = _mm256_and_si256(raw[j], low4);
      __m256i hi = _mm256_and_si256(_mm256_srli_epi16(raw[j], 4), low4);
      if (q5) {
        lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh[j], 2 * g), one), 4));
        hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh[j], 2 * g + 1), one), 4));
      }
      store_column_pair(lo, cb.level, 64 * g, j);
      store_column_pair(hi, cb.level, 64 * g + 32, j);
    }
  }
}

// Q6_K: levels q - 32 (signed) and the 16 scales d * sc[k] of 16 columns each, as
// dequantize_q6k_half computes them.
void q6k_columns(const PairBlocks& rows, ColumnBlock& cb) {
  const size_t ql_at = 0, qh_at = 128, d_at = 208;
  // The 16 scale bytes (192..207) transposed for the 16 rows, from the block's last 32 bytes
  // (178..209: a load that stays inside the block): scale k is byte 14 + k of that window,
  // in the low lane of packed[14 + k] for k < 2, the high lane of packed[k - 2] after.
  __m256i packed[16];
  transpose_bytes_16x32(rows, 178, packed);
  const __m512 d = halves_of_rows(rows, d_at);
  for (int k = 0; k < 16; ++k) {
    const __m128i sc = k < 2 ? _mm256_castsi256_si128(packed[14 + k]) : _mm256_extracti128_si256(packed[k - 2], 1);
    _mm512_store_ps(cb.scale[k], _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(sc))));
  }
  const __m256i low4 = _mm256_set1_epi8(0x0F), high_pair = _mm256_set1_epi8(0x30), thirty_two = _mm256_set1_epi8(32);
  for (int h = 0; h < 2; ++h) {  // halves of 128 columns
    __m256i ql0[16], ql1[16], qh[16];
    transpose_bytes_16x32(rows, ql_at + 64 * h, ql0);
    transpose_bytes_16x32(rows, ql_at + 64 * h + 32, ql1);
    transpose_bytes_16x32(rows, qh_at + 32 * h, qh);
    for (int j = 0; j < 16; ++j) {  // the AVX2 dequantizer's byte-wise formulas, columns 128h + 32k + ...
      const __m256i q[4] = {
          _mm256_or_si256(_mm256_and_si256(ql0[j], low4), _mm256_and_si256(_mm256_slli_epi16(qh[j], 4), high_pair)),
          _mm256_or_si256(_mm256_and_si256(ql1[j], low4), _mm256_and_si256(_mm256_slli_epi16(qh[j], 2), high_pair)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0[j], 4), low4), _mm256_and_si256(qh[j], high_pair)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1[j], 4), low4),
                          _mm256_and_si256(_mm256_srli_epi16(qh[j], 2), high_pair)),
      };
      for (int k = 0; k < 4; ++k) store_column_pair(_mm256_sub_epi8(q[k], thirty_two), cb.level, 128 * h + 32 * k, j);
    }
  }
}

// Column c's 16 weights from a ColumnBlock: Q4_K/Q5_K d1 * q - m1 rounded as the panel
// dequantizer rounds it (q4k_value), Q6_K float(q) * (d * sc).
template <bool SixBit>
inline __m512 column_weights(const ColumnBlock& cb, int c) {
  const __m128i q = _mm_load_si128(reinterpret_cast<const __m128i*>(cb.level + 16 * c));
  if constexpr (SixBit) {
    return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)), _mm512_load_ps(cb.scale[c / 16]));
  } else {
    const __m512 qf = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(q));
    const __m512 d1 = _mm512_load_ps(cb.scale[c / 32]), m1 = _mm512_load_ps(cb.min[c / 32]);
#if NL_REFERENCE_FUSES_MUL_SUB
    return _mm512_fmsub_ps(d1, qf, m1);
#else
    __m512 prod = _mm512_mul_ps(d1, qf);
    asm("" : "+v"(prod));  // keeps the compiler from fusing the multiply into the subtraction
    return _mm512_sub_ps(prod, m1);
#endif
  }
}

// ---- the products -------------------------------------------------------------------------

// NP pairs of row groups from g (2 * NP whole groups), all columns, nt tokens.
template <int NP>
void f16_pairs(const TiledMatrix& m, int64_t g, const float* X, int64_t ldx, int64_t nt, float* Y, int64_t ldy) {
  Chains<NP> ch(X, ldx, nt);
  alignas(64) uint16_t cols[NP][32 * 16];
  for (int64_t b = 0; b < m.n_blocks(); ++b) {
    for (int p = 0; p < NP; ++p) {
      __m256i col[32];
      transpose_f16_pair(m.tile(g + 2 * p, b), m.tile(g + 2 * p + 1, b), col);
      for (int c = 0; c < 32; ++c) _mm256_store_si256(reinterpret_cast<__m256i*>(cols[p] + 16 * c), col[c]);
    }
    const int64_t c0 = b * 32;
    for (int c = 0; c < 32; ++c)
      for (int p = 0; p < NP; ++p)
        ch.add(p, c0 + c, _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(cols[p] + 16 * c))));
  }
  for (int p = 0; p < NP; ++p) ch.store(p, (g + 2 * p) * 8, Y, ldy);
}

template <int NP, bool SixBit>
void kquant_pairs(const TiledMatrix& m, int64_t g, const float* X, int64_t ldx, int64_t nt, float* Y, int64_t ldy) {
  Chains<NP> ch(X, ldx, nt);
  ColumnBlock cb[NP];
  for (int64_t b = 0; b < m.n_blocks(); ++b) {
    for (int p = 0; p < NP; ++p) {
      const PairBlocks rows{m.tile(g + 2 * p, b), m.tile(g + 2 * p + 1, b), m.block_bytes};
      if constexpr (SixBit) q6k_columns(rows, cb[p]);
      else q4k_q5k_columns(m.type, rows, cb[p]);
    }
    const int64_t c0 = b * 256;
    for (int c = 0; c < 256; ++c)
      for (int p = 0; p < NP; ++p) ch.add(p, c0 + c, column_weights<SixBit>(cb[p], c));
  }
  for (int p = 0; p < NP; ++p) ch.store(p, (g + 2 * p) * 8, Y, ldy);
}

template <int NP>
void pairs(const TiledMatrix& m, int64_t g, const float* X, int64_t ldx, int64_t nt, float* Y, int64_t ldy) {
  switch (m.type) {
    case QType::F16: f16_pairs<NP>(m, g, X, ldx, nt, Y, ldy); break;
    case QType::Q4_K:
    case QType::Q5_K: kquant_pairs<NP, false>(m, g, X, ldx, nt, Y, ldy); break;
    default: kquant_pairs<NP, true>(m, g, X, ldx, nt, Y, ldy); break;  // Q6_K
  }
}

// The AVX2 set's f32 kernel: the same bits, for what this one does not take.
const MatvecKernels* avx2_set() {
  static const MatvecKernels* k = matvec_kernels_avx2_vnni() ? matvec_kernels_avx2_vnni() : matvec_kernels_avx2();
  return k;
}

void f32_tiles_avx512(const TiledMatrix& m, int64_t g0, int64_t g1, const float* X, int64_t ldx, int64_t nt, float* Y,
                      int64_t ldy) {
  const bool mine = m.type == QType::F16 || m.type == QType::Q4_K || m.type == QType::Q5_K || m.type == QType::Q6_K;
  if (!mine) return avx2_set()->f32_tiles(m, g0, g1, X, ldx, nt, Y, ldy);
  for (int64_t t0 = 0; t0 < nt; t0 += kMaxTokens) {
    const int64_t n = std::min<int64_t>(kMaxTokens, nt - t0);
    const float* x = X + t0 * ldx;
    float* y = Y + t0 * ldy;
    int64_t g = g0;
    for (; g + 8 <= g1; g += 8) pairs<4>(m, g, x, ldx, n, y, ldy);
    for (; g + 2 <= g1; g += 2) pairs<1>(m, g, x, ldx, n, y, ldy);
    if (g < g1) avx2_set()->f32_tiles(m, g, g1, x, ldx, n, y, ldy);  // a lone group
  }
}

}  // namespace
}  // namespace nl::engine

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC diagnostic pop
#pragma GCC pop_options
#endif

namespace nl::engine {

const MatvecKernels* matvec_kernels_avx512() {
  static const bool cpu_has_it = [] {
    const char* off = std::getenv("NL_MATVEC_AVX512");
    if (off && std::string(off) == "0") return false;  // the AVX2 kernel asked for (A/B runs)
    return x86_features().avx512 && (matvec_kernels_avx2_vnni() || matvec_kernels_avx2());
  }();
  if (!cpu_has_it) return nullptr;
  static const MatvecKernels k{"avx512", avx2_set()->int8_tiles, f32_tiles_avx512};
  return &k;
}

}  // namespace nl::engine

#else

namespace nl::engine {
const MatvecKernels* matvec_kernels_avx512() { return nullptr; }
}  // namespace nl::engine

#endif
