// The AVX2 int8 kernels (layouts and arithmetic: kernels_int8.h), compiled four times: by
// kernels_int8_avx2.cpp for AVX2+FMA+F16C, by kernels_int8_avx2_vnni.cpp with AVX-VNNI
// as well (NL_INT8_VNNI = 1), by kernels_int8_avx512_vnni.cpp with AVX-512 VNNI instead
// (NL_INT8_VNNI = NL_INT8_VNNI_EVEX = 1) and by kernels_int8_avx2_vnni_emulated.cpp, the
// VNNI set with vpdpbusd emulated (for tests). The including file sets the target pragma; everything here
// has internal linkage, so each compilation is its own set.
//
// The integer dot product, without VNNI, is vpmaddubsw (unsigned x signed bytes -> pairs
// summed into int16) then vpmaddwd with ones (-> int32). Q4_0 panels hold unsigned nibbles,
// so the activations (signed) go straight into vpmaddubsw and, as |nibble x q| <= 15 x 128,
// the eight 4-byte chunks of a block can be summed in int16 before a single vpmaddwd (the
// multiply pipe is the bottleneck; this halves its work). Signed panels (Q8_0, requantized
// types) use the sign trick, vpmaddubsw(|w|, sign(x, w)), and widen every chunk.
// With VNNI, vpdpbusd does a chunk's multiply, pair sums and int32 accumulation in one
// instruction (exact, no int16 stage) for both kinds; the integers are the same, so both
// compilations give the same bits.
//
// A 4-byte chunk of activations is broadcast to all 8 lanes, each lane holding the same 4
// columns of another weight row (forward) or 4 rows of another column (input grad), so
// each int32 lane ends with one output's dot product: no horizontal sums.
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels_int8.h"

#ifndef NL_INT8_VNNI
#error "define NL_INT8_VNNI (0 or 1) and the target pragma before including kernels_int8_avx2_body.h"
#endif
#ifndef NL_INT8_VNNI_EMULATED
#define NL_INT8_VNNI_EMULATED 0
#endif
// NL_INT8_VNNI_EVEX: vpdpbusd in its AVX-512 VNNI (EVEX) form, under a target pragma with
// AVX512F/BW/VL/VNNI (kernels_int8_avx512_vnni.cpp); the compiler may then also use
// ymm16-31 and EVEX forms of the other instructions. The same integers.
#ifndef NL_INT8_VNNI_EVEX
#define NL_INT8_VNNI_EVEX 0
#endif

// Without reassociation GCC keeps each token's int16 sums as the chains they are written as
// instead of trees of all 32 products (fewer spills): the input gradient is 3-4% faster on
// Zen 1, the forward unchanged. (The integer sums are exact in any order.)
#if !defined(__clang__)  // (a GCC pass; clang has no such option)
#pragma GCC optimize("no-tree-reassoc")
#endif

namespace nl::engine {
namespace {

// With VNNI, signed panels (Q8_0, the requantized types) take the activations unsigned,
// q + 128 (vpdpbusd's unsigned operand), against the signed weights, and subtract 128 x the
// weights' sum over the reduced dimension: per row and block in the forward product (the
// packers store it in ForwardPanel::wsum), per column and row block in the input gradient
// (computed once per panel pass). No sign operations per token, and two panels or column
// groups share each activation broadcast, as nibble panels do. The integers are the same.
// Without VNNI vpmaddubsw would saturate on pairs of 255 x 127, so the sign trick stays.
inline constexpr bool kUnsignedActivations = NL_INT8_VNNI;

#if NL_INT8_VNNI
// vpdpbusd: sums + the four products of unsigned bytes u and signed bytes s per int32 lane.
// With NL_INT8_VNNI_EMULATED the same integers from AVX2 instructions (bytes widened to
// int16 by parity, two vpmaddwd: exact), so that CPUs without AVX-VNNI, and qemu, whose
// TCG has none, run and test this set's code (kernels_int8_avx2_vnni_emulated.cpp).
inline __m256i dpbusd(__m256i sums, __m256i u, __m256i s) {
#if NL_INT8_VNNI_EMULATED
  const __m256i u_even = _mm256_and_si256(u, _mm256_set1_epi16(0x00FF)), u_odd = _mm256_srli_epi16(u, 8);
  const __m256i s_even = _mm256_srai_epi16(_mm256_slli_epi16(s, 8), 8), s_odd = _mm256_srai_epi16(s, 8);
  return _mm256_add_epi32(sums, _mm256_add_epi32(_mm256_madd_epi16(u_even, s_even), _mm256_madd_epi16(u_odd, s_odd)));
#elif NL_INT8_VNNI_EVEX
  return _mm256_dpbusd_epi32(sums, u, s);
#else
  return _mm256_dpbusd_avx_epi32(sums, u, s);
#endif
}
#endif

// q + 128 for signed bytes q: the sign bit flipped.
inline __m256i flip_to_unsigned(__m256i q) { return _mm256_xor_si256(q, _mm256_set1_epi8(static_cast<char>(0x80))); }

// 128 x the sum of each lane's four bytes over kChunks chunks (a panel block's rows in the
// forward product, one column group's columns in the input gradient): the weight sums that
// unsigned activations subtract. vpmaddubsw with ones is exact here (|pair| <= 256).
template <int kChunks = 8>
inline __m256i chunk_sums_x128(const __m256i* chunks) {
  const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
  __m256i s = _mm256_setzero_si256();
  for (int c = 0; c < kChunks; ++c)
    s = _mm256_add_epi32(s, _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, _mm256_loadu_si256(chunks + c)), ones16));
  return _mm256_slli_epi32(s, 7);
}

inline __m256i broadcast_chunk(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// 32 values rounded half to even and packed to int8. The packs work per 128-bit lane, so
// the 4-byte chunks come out in the order kLaneChunk gives: chunk c (values 4c .. 4c+3) is
// dword kLaneChunk[c] of the result. Returns the packed bytes and stores the quants'
// partial sums in 8 lanes.
inline constexpr int kLaneChunk[8] = {0, 4, 1, 5, 2, 6, 3, 7};
inline __m256i round_to_int8_lanes(const __m256 v[4], __m256i* partial_sums) {
  __m256i i[4];
  for (int k = 0; k < 4; ++k) i[k] = _mm256_cvtps_epi32(v[k]);
  *partial_sums = _mm256_add_epi32(_mm256_add_epi32(i[0], i[1]), _mm256_add_epi32(i[2], i[3]));
  return _mm256_packs_epi16(_mm256_packs_epi32(i[0], i[1]), _mm256_packs_epi32(i[2], i[3]));
}

// The same, stored as int8 in order (output dword c = packed dword kLaneChunk[c]).
inline __m256i round_to_int8(const __m256 v[4], int8_t* q) {
  __m256i sums;
  const __m256i packed = round_to_int8_lanes(v, &sums);
  const __m256i order = _mm256_setr_epi32(kLaneChunk[0], kLaneChunk[1], kLaneChunk[2], kLaneChunk[3], kLaneChunk[4],
                                          kLaneChunk[5], kLaneChunk[6], kLaneChunk[7]);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), _mm256_permutevar8x32_epi32(packed, order));
  return sums;
}

inline int32_t lane_sum(__m256i v) {
  __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4E));
  s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xB1));
  return _mm_cvtsi128_si32(s4);
}

// max |v| of 8N values, exact in any order, a NaN dropped as std::max(m, NaN) drops it in
// the scalar definitions: vmaxps returns its second operand when either is a NaN, so a
// running maximum taken second never becomes one.
template <int N = 4>
inline float max_abs(const __m256 v[N]) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 m = _mm256_setzero_ps();
  for (int k = 0; k < N; ++k) m = _mm256_max_ps(_mm256_and_ps(v[k], abs_mask), m);
  __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  h = _mm_max_ps(h, _mm_movehl_ps(h, h));
  h = _mm_max_ss(h, _mm_movehdup_ps(h));
  return _mm_cvtss_f32(h);
}

// The quantizer of kernels_int8.h on 32 floats in four registers: same max, same scale,
// same products and the same round-half-to-even conversion as quantize_block_scalar.
inline void quantize_block(__m256 v0, __m256 v1, __m256 v2, __m256 v3, int8_t* q, float* d, int32_t* sum) {
  const __m256 v[4] = {v0, v1, v2, v3};
  const float scale = max_abs(v) / 127.0f;
  const __m256 inv = _mm256_set1_ps(scale != 0.0f ? 1.0f / scale : 0.0f);
  const __m256 scaled[4] = {_mm256_mul_ps(v0, inv), _mm256_mul_ps(v1, inv), _mm256_mul_ps(v2, inv),
                            _mm256_mul_ps(v3, inv)};
  *sum = lane_sum(round_to_int8(scaled, q));
  *d = scale;
}

void quantize_row_avx2(const float* x, int64_t n, int8_t* q, float* d, int32_t* sum) {
  int64_t b = 0;
  for (; (b + 1) * kQ8Block <= n; ++b) {
    const float* v = x + b * kQ8Block;
    quantize_block(_mm256_loadu_ps(v), _mm256_loadu_ps(v + 8), _mm256_loadu_ps(v + 16), _mm256_loadu_ps(v + 24),
                   q + b * kQ8Block, d + b, sum + b);
  }
  if (b * kQ8Block < n) {
    float v[kQ8Block] = {};
    std::memcpy(v, x + b * kQ8Block, static_cast<size_t>(n - b * kQ8Block) * sizeof(float));
    quantize_block_scalar(v, q + b * kQ8Block, d + b, sum + b);
  }
}

float tile_scale(const uint8_t* tile, int64_t i) {
  uint16_t bits;
  std::memcpy(&bits, tile + i * 2, 2);
  return _cvtsh_ss(bits);
}

// The 8 row scales of a tile as floats (0 for the rows past nr, e.g. all 8 when nr = 0).
inline void tile_scales(const uint8_t* tile, int64_t nr, float* out) {
  if (nr == kTileRows) {
    _mm256_storeu_ps(out, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(tile))));
    return;
  }
  for (int64_t i = 0; i < 8; ++i) out[i] = i < nr ? tile_scale(tile, i) : 0.0f;
}

// out[k] = dword k of rows a, b, c, d (a 4x4 transpose of 32-bit elements).
inline void transpose_dwords(__m128i a, __m128i b, __m128i c, __m128i d, __m128i out[4]) {
  const __m128i t0 = _mm_unpacklo_epi32(a, b), t1 = _mm_unpackhi_epi32(a, b);
  const __m128i t2 = _mm_unpacklo_epi32(c, d), t3 = _mm_unpackhi_epi32(c, d);
  out[0] = _mm_unpacklo_epi64(t0, t2);
  out[1] = _mm_unpackhi_epi64(t0, t2);
  out[2] = _mm_unpacklo_epi64(t1, t3);
  out[3] = _mm_unpackhi_epi64(t1, t3);
}

// The 4-byte chunks of 8 rows' 16 bytes (r[i]: row i): chunk k holds column 4k..4k+3 of
// rows 0..7, row i in lane i (the forward panels' layout).
inline void chunks_of_rows(const __m128i r[8], __m256i chunk[4]) {
  __m128i lo[4], hi[4];
  transpose_dwords(r[0], r[1], r[2], r[3], lo);
  transpose_dwords(r[4], r[5], r[6], r[7], hi);
  for (int k = 0; k < 4; ++k) chunk[k] = _mm256_set_m128i(hi[k], lo[k]);
}

// The bytes of 4 rows' 16 columns (r[s]: row s) interleaved per column, [a_j b_j c_j d_j]
// for columns j: columns 0..7 and 8..15 (the input-gradient panels' layout).
inline void interleave_rows(const __m128i r[4], __m256i* cols0_7, __m256i* cols8_15) {
  const __m128i ab_lo = _mm_unpacklo_epi8(r[0], r[1]), ab_hi = _mm_unpackhi_epi8(r[0], r[1]);
  const __m128i cd_lo = _mm_unpacklo_epi8(r[2], r[3]), cd_hi = _mm_unpackhi_epi8(r[2], r[3]);
  *cols0_7 = _mm256_set_m128i(_mm_unpackhi_epi16(ab_lo, cd_lo), _mm_unpacklo_epi16(ab_lo, cd_lo));
  *cols8_15 = _mm256_set_m128i(_mm_unpackhi_epi16(ab_hi, cd_hi), _mm_unpacklo_epi16(ab_hi, cd_hi));
}

// forward_weight_sums (kernels_int8.h) in registers: lane i of each chunk is row i's four
// bytes.
inline void forward_weight_sums_avx2(ForwardPanel& p) {
  for (int64_t b = 0; b < p.blocks; ++b)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p.wsum.data() + b * 8),
                        chunk_sums_x128(reinterpret_cast<const __m256i*>(p.q.data() + b * 256)));
}

// The packers ask for the tiles they will read next (prefetch_ahead, tile_layout.h): the
// forward packer reads a row group's tiles, one run of memory, and asks for the tile
// kPackPrefetchTiles ahead in the run.
inline constexpr size_t kPackPrefetchTiles = 16;

// A Q4_K row group (kernels_int8.h): per super-block and 64-value group, each row's 32 bytes
// of quants hold sub-block 2j in the low nibbles and 2j+1 in the high ones; the 8 rows'
// 4-byte chunks move with dword transposes, as Q8_0's do, then split into the two nibbles.
void pack_forward_q4k_tiles_avx2(const TiledMatrix& m, int64_t g, ForwardPanel& p) {
  const int64_t nr = m.group_rows(g), nsb = m.n_blocks();
  p.start_kquant(m.type, nsb * 8);
  const __m256i low = _mm256_set1_epi8(0x0F);
  const size_t tile_bytes = static_cast<size_t>(nr) * m.block_bytes;
  for (int64_t sb = 0; sb < nsb; ++sb) {
    const uint8_t* tile = m.tile(g, sb);
    prefetch_ahead(tile, 2 * tile_bytes, tile_bytes);
    kquant_forward_panel_scales(m, g, sb, p);
    for (int j2 = 0; j2 < 4; ++j2) {
      __m256i* out_lo = reinterpret_cast<__m256i*>(p.q.data() + (sb * 8 + 2 * j2) * 256);
      __m256i* out_hi = out_lo + 8;  // the next block (256 bytes on)
      for (int half = 0; half < 2; ++half) {
        __m128i r[8];
        for (int64_t i = 0; i < 8; ++i)
          r[i] = i < nr ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(tile + static_cast<size_t>(i) * m.block_bytes +
                                                                            kQ4KQuantsOffset + 32 * j2 + 16 * half))
                        : _mm_setzero_si128();
        __m256i chunk[4];
        chunks_of_rows(r, chunk);
        for (int k = 0; k < 4; ++k) {
          _mm256_storeu_si256(out_lo + half * 4 + k, _mm256_and_si256(chunk[k], low));
          _mm256_storeu_si256(out_hi + half * 4 + k, _mm256_and_si256(_mm256_srli_epi16(chunk[k], 4), low));
        }
      }
    }
  }
}

// 16 values of Q5_K sub-block j of one row from 16 bytes of its nibbles (raw, the sub-block's
// in the low or high halves) and the matching 16 bytes of qh: (nibble | bit j of qh << 4) -
// 16 as signed bytes (kernels_int8.h: q5k_quant).
inline __m128i q5k_values(__m128i raw, __m128i qh, int j) {
  const __m128i low = _mm_set1_epi8(0x0F), one = _mm_set1_epi8(1), sixteen = _mm_set1_epi8(16);
  const __m128i nib = _mm_and_si128(j % 2 == 0 ? raw : _mm_srli_epi16(raw, 4), low);
  const __m128i bit = _mm_and_si128(_mm_srl_epi16(qh, _mm_cvtsi32_si128(j)), one);  // (bytes' own bits: masked)
  return _mm_sub_epi8(_mm_or_si128(nib, _mm_slli_epi16(bit, 4)), sixteen);
}

// A Q5_K row group: each sub-block's values q - 16 (Signed5 panels), 16 columns of the 8 rows
// at a time moved with the dword transposes of Q8_0's.
void pack_forward_q5k_tiles_avx2(const TiledMatrix& m, int64_t g, ForwardPanel& p) {
  const int64_t nr = m.group_rows(g), nsb = m.n_blocks();
  p.start_kquant(m.type, nsb * 8);
  const size_t tile_bytes = static_cast<size_t>(nr) * m.block_bytes;
  for (int64_t sb = 0; sb < nsb; ++sb) {
    const uint8_t* tile = m.tile(g, sb);
    prefetch_ahead(tile, 2 * tile_bytes, tile_bytes);
    kquant_forward_panel_scales(m, g, sb, p);
    for (int j = 0; j < 8; ++j) {
      __m256i* out = reinterpret_cast<__m256i*>(p.q.data() + (sb * 8 + j) * 256);
      for (int half = 0; half < 2; ++half) {
        __m128i r[8];
        for (int64_t i = 0; i < 8; ++i) {
          if (i >= nr) {
            r[i] = _mm_setzero_si128();
            continue;
          }
          const uint8_t* block = tile + static_cast<size_t>(i) * m.block_bytes;
          const __m128i raw =
              _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + kQ5KQuantsOffset + 32 * (j / 2) + 16 * half));
          const __m128i qh = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + kQ5KHighBitsOffset + 16 * half));
          r[i] = q5k_values(raw, qh, j);
        }
        __m256i chunk[4];
        chunks_of_rows(r, chunk);
        for (int k = 0; k < 4; ++k) _mm256_storeu_si256(out + half * 4 + k, chunk[k]);
      }
    }
  }
  forward_weight_sums_avx2(p);
}

// 16 values of one row's 32-column block j (of 8) of a Q6_K block from 16 bytes of its low
// nibbles and the matching 16 bytes of its high bit pairs: q - 32 as signed bytes
// (kernels_int8.h: q6k_quant; block j takes the high nibbles when j % 4 >= 2, and bit pair
// j % 4).
inline __m128i q6k_values(__m128i ql, __m128i qh, int j) {
  const int quarter = j % 4;
  const __m128i nib = _mm_and_si128(quarter < 2 ? ql : _mm_srli_epi16(ql, 4), _mm_set1_epi8(0x0F));
  const __m128i pair = _mm_and_si128(_mm_srl_epi16(qh, _mm_cvtsi32_si128(2 * quarter)), _mm_set1_epi8(3));
  return _mm_sub_epi8(_mm_or_si128(nib, _mm_slli_epi16(pair, 4)), _mm_set1_epi8(32));
}
// The 16 bytes of low nibbles and of high bit pairs that hold columns 32 j + 16 half ..
// + 15 of a Q6_K block.
inline void q6k_bytes(const uint8_t* block, int j, int half, __m128i* ql, __m128i* qh) {
  const int n = j / 4, quarter = j % 4;
  *ql = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 64 * n + 32 * (quarter & 1) + 16 * half));
  *qh = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + kQ6KHighBitsOffset + 32 * n + 16 * half));
}

// A Q6_K row group: each block's values q - 32 (Signed6 panels), 16 columns of the 8 rows at
// a time moved with the dword transposes of Q8_0's; the weight sums per half (chunks 0-3 and
// 4-7) times the halves' scales.
void pack_forward_q6k_tiles_avx2(const TiledMatrix& m, int64_t g, ForwardPanel& p) {
  const int64_t nr = m.group_rows(g), nsb = m.n_blocks();
  p.start_q6k(nsb * 8);
  const size_t tile_bytes = static_cast<size_t>(nr) * m.block_bytes;
  for (int64_t sb = 0; sb < nsb; ++sb) {
    const uint8_t* tile = m.tile(g, sb);
    prefetch_ahead(tile, 2 * tile_bytes, tile_bytes);
    q6k_forward_panel_scales(m, g, sb, p);
    for (int j = 0; j < 8; ++j) {
      const int64_t b = sb * 8 + j;
      __m256i* out = reinterpret_cast<__m256i*>(p.q.data() + b * 256);
      __m256i scaled_sums = _mm256_setzero_si256();
      for (int half = 0; half < 2; ++half) {
        __m128i r[8];
        for (int64_t i = 0; i < 8; ++i) {
          r[i] = _mm_setzero_si128();  // (a padded row)
          if (i >= nr) continue;
          __m128i ql, qh;
          q6k_bytes(tile + static_cast<size_t>(i) * m.block_bytes, j, half, &ql, &qh);
          r[i] = q6k_values(ql, qh, j);
        }
        __m256i chunk[4];
        chunks_of_rows(r, chunk);
        for (int k = 0; k < 4; ++k) _mm256_storeu_si256(out + half * 4 + k, chunk[k]);
        const __m256i sc = _mm256_srai_epi32(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p.sub_scales.data() + (b * 2 + half) * 8)), 16);
        scaled_sums = _mm256_add_epi32(scaled_sums, _mm256_mullo_epi32(chunk_sums_x128<4>(chunk), sc));
      }
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(p.wsum.data() + b * 8), scaled_sums);
    }
  }
}

void pack_forward_tiles_avx2(const TiledMatrix& m, int64_t g, ForwardPanel& p) {
  if (m.type == QType::Q4_K) return pack_forward_q4k_tiles_avx2(m, g, p);
  if (m.type == QType::Q5_K) return pack_forward_q5k_tiles_avx2(m, g, p);
  if (m.type == QType::Q6_K) return pack_forward_q6k_tiles_avx2(m, g, p);
  const int64_t nr = m.group_rows(g), nb = m.n_blocks();
  const bool q4 = m.type == QType::Q4_0;
  const size_t quant_bytes = m.block_bytes - sizeof(uint16_t);
  p.kind = legacy_tile_kind(m);
  p.has_offsets = false;
  p.resize(nb);
  const __m256i low = _mm256_set1_epi8(0x0F);
  const size_t tile_bytes = static_cast<size_t>(nr) * m.block_bytes;
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* tile = m.tile(g, b);
    prefetch_ahead(tile, kPackPrefetchTiles * tile_bytes, tile_bytes);
    const uint8_t* quants = tile + static_cast<size_t>(nr) * sizeof(uint16_t);
    tile_scales(tile, nr, p.d.data() + b * 8);
    __m256i* out = reinterpret_cast<__m256i*>(p.q.data() + b * 256);
    for (int half = 0; half < (q4 ? 1 : 2); ++half) {
      __m128i r[8];
      for (int64_t i = 0; i < 8; ++i)
        r[i] = i < nr ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(quants + i * quant_bytes + half * 16))
                      : _mm_setzero_si128();
      __m256i chunk[4];
      chunks_of_rows(r, chunk);
      for (int k = 0; k < 4; ++k) {
        if (q4) {
          _mm256_storeu_si256(out + k, _mm256_and_si256(chunk[k], low));
          _mm256_storeu_si256(out + k + 4, _mm256_and_si256(_mm256_srli_epi16(chunk[k], 4), low));
        } else {
          _mm256_storeu_si256(out + half * 4 + k, chunk[k]);
        }
      }
    }
  }
  if (!q4) forward_weight_sums_avx2(p);
}

// 32 floats rounded half to even to int16 (saturating, as round_to_int16: a NaN gives
// -32768), stored in order: the packs work per 128-bit lane, a qword permute restores it.
inline void store_int16(const __m256 v[4], int16_t* out) {
  for (int h = 0; h < 2; ++h) {
    const __m256i packed = _mm256_packs_epi32(_mm256_cvtps_epi32(v[2 * h]), _mm256_cvtps_epi32(v[2 * h + 1]));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 16 * h), _mm256_permute4x64_epi64(packed, 0xD8));
  }
}

// normalize_grad_scales (kernels_int8.h) in registers: the same maximum and the same
// divisions (IEEE division is exact in any width), so the same ratios and rho16.
void normalize_grad_scales_avx2(GradPanel& p) {
  constexpr int kRegs = kGradRowBlock / 8;
  for (int64_t b = 0; b < p.scale_blocks(); ++b) {
    float* rho = p.rho.data() + b * kGradRowBlock;
    __m256 v[kRegs];
    for (int k = 0; k < kRegs; ++k) v[k] = _mm256_loadu_ps(rho + 8 * k);
    const float m = max_abs<kRegs>(v);
    p.m[static_cast<size_t>(b)] = m;
    const __m256 mv = _mm256_set1_ps(m), q15 = _mm256_set1_ps(16384.0f);
    __m256 scaled[kRegs];
    for (int k = 0; k < kRegs; ++k) {
      v[k] = m != 0.0f ? _mm256_div_ps(v[k], mv) : _mm256_setzero_ps();
      _mm256_storeu_ps(rho + 8 * k, v[k]);
      scaled[k] = _mm256_mul_ps(v[k], q15);
    }
    for (int h = 0; h < kRegs / 4; ++h) store_int16(scaled + 4 * h, p.rho16.data() + b * kGradRowBlock + 32 * h);
  }
}

// pack_grad_tiles for one weight type (kQ4: Q4_0, else Q8_0). kFull: the row block's 64
// rows all exist, so the tiles are addressed once per block and no row is checked. Written
// with the type and the row checks decided at run time, GCC kept the loop state on the stack
// and branched per row: a task's packing took 3.5x the forward's on the same bytes (Zen 3,
// 8960 x 1536 Q4_0, 256 columns), 7% of the input gradient's task.
template <bool kQ4, bool kFull>
void pack_grad_tiles_kind(const TiledMatrix& m, int64_t rb, int64_t b0, int64_t b1, GradPanel& p) {
  constexpr size_t kQuantBytes = kQ4 ? 16 : 32;  // one row's quants in a tile
  const __m256i low = _mm256_set1_epi8(0x0F), eight = _mm256_set1_epi8(8);
  // (Padded rows: nibbles of 8, value 0.)
  const __m128i padding = kQ4 ? _mm_set1_epi8(static_cast<char>(0x88)) : _mm_setzero_si128();
  const size_t row_bytes = m.block_bytes * static_cast<size_t>(m.n_blocks());
  for (int64_t b = b0; b < b1; ++b) {
    __m256i* out = reinterpret_cast<__m256i*>(p.q.data() + (b - b0) * kGradPanelBlockBytes);
    float* scales = p.rho.data() + (b - b0) * kGradRowBlock;
    constexpr int64_t kGroups = kGradRowBlock / kTileRows;
    for (int64_t gi = 0; gi < kGroups; ++gi) {  // the row block's row groups (tiles), 2 chunks each
      const int64_t g = rb * kGroups + gi;
      const int64_t nr = kFull ? kTileRows : g * kTileRows < m.rows ? m.group_rows(g) : 0;
      const uint8_t* tile = nr > 0 ? m.tile(g, b) : nullptr;
      // The task's next row block reads the same columns kGroups row groups on: ask for them
      // now, to arrive while this row block's products run (past the last row block,
      // another matrix's bytes or none: harmless, as prefetch_ahead says).
      if (nr > 0) prefetch_ahead(tile, kGroups * kTileRows * row_bytes, static_cast<size_t>(nr) * m.block_bytes);
      if (kFull)
        _mm256_storeu_ps(scales + 8 * gi, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(tile))));
      else
        tile_scales(tile, nr, scales + 8 * gi);
      const uint8_t* quants = tile + static_cast<size_t>(nr) * sizeof(uint16_t);
      for (int64_t k = 2 * gi; k < 2 * gi + 2; ++k) {  // chunk k: rows 4k .. 4k+3 of the row block
        const int64_t i0 = 4 * (k - 2 * gi);
        for (int half = 0; half < (kQ4 ? 1 : 2); ++half) {
          __m128i r[4];
          for (int64_t s = 0; s < 4; ++s)
            r[s] = kFull || i0 + s < nr
                       ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(quants + (i0 + s) * kQuantBytes + half * 16))
                       : padding;
          __m256i cols0_7, cols8_15;
          interleave_rows(r, &cols0_7, &cols8_15);
          if (kQ4) {  // low nibbles: columns 0..15, high nibbles: columns 16..31; values u - 8
            const auto value = [&](__m256i u) { return _mm256_sub_epi8(_mm256_and_si256(u, low), eight); };
            _mm256_storeu_si256(out + 0 * kGradChunks + k, value(cols0_7));
            _mm256_storeu_si256(out + 1 * kGradChunks + k, value(cols8_15));
            _mm256_storeu_si256(out + 2 * kGradChunks + k, value(_mm256_srli_epi16(cols0_7, 4)));
            _mm256_storeu_si256(out + 3 * kGradChunks + k, value(_mm256_srli_epi16(cols8_15, 4)));
          } else {
            _mm256_storeu_si256(out + (2 * half + 0) * kGradChunks + k, cols0_7);
            _mm256_storeu_si256(out + (2 * half + 1) * kGradChunks + k, cols8_15);
          }
        }
      }
    }
  }
}

// pack_grad_tiles for Q4_K and Q5_K (kQ5; kFull as above): a sub-block's 32 nibbles of a row
// are 32 bytes' low or high halves, so the 4 rows of a chunk interleave as Q8_0's do, then
// give q - 8 (Q4_K) or, with the high bits, q - 16 (Q5_K).
template <bool kQ5, bool kFull>
void pack_grad_kquant_tiles_kind(const TiledMatrix& m, int64_t rb, int64_t b0, int64_t b1, GradPanel& p) {
  const __m128i low = _mm_set1_epi8(0x0F), eight = _mm_set1_epi8(8);
  const size_t row_bytes = m.block_bytes * static_cast<size_t>(m.n_blocks());
  constexpr int64_t kGroups = kGradRowBlock / kTileRows;
  for (int64_t b = b0; b < b1; ++b) {
    const int j = static_cast<int>(b % 8);
    __m256i* out = reinterpret_cast<__m256i*>(p.q.data() + (b - b0) * kGradPanelBlockBytes);
    float* scales = p.rho.data() + (b - b0) * kGradRowBlock;
    for (int64_t gi = 0; gi < kGroups; ++gi) {  // the row block's row groups (tiles), 2 chunks each
      const int64_t g = rb * kGroups + gi;
      const int64_t nr = kFull ? kTileRows : g * kTileRows < m.rows ? m.group_rows(g) : 0;
      const uint8_t* tile = nr > 0 ? m.tile(g, b / 8) : nullptr;
      if (nr > 0 && (j == 0 || b == b0))  // the next row block's tile (as in pack_grad_tiles_kind), once per tile
        prefetch_ahead(tile, kGroups * kTileRows * row_bytes, static_cast<size_t>(nr) * m.block_bytes);
      for (int64_t i = 0; i < kTileRows; ++i)
        scales[8 * gi + i] = kFull || i < nr ? kquant_scale(tile + static_cast<size_t>(i) * m.block_bytes, j) : 0.0f;
      for (int64_t k = 2 * gi; k < 2 * gi + 2; ++k) {  // chunk k: rows 4k .. 4k+3 of the row block
        const int64_t i0 = 4 * (k - 2 * gi);
        for (int half = 0; half < 2; ++half) {  // columns 0..15, then 16..31
          __m128i r[4];
          for (int64_t s = 0; s < 4; ++s) {
            if (!kFull && i0 + s >= nr) {  // a padded row: value 0
              r[s] = _mm_setzero_si128();
              continue;
            }
            const uint8_t* block = tile + static_cast<size_t>(i0 + s) * m.block_bytes;
            constexpr size_t kQuants = kQ5 ? kQ5KQuantsOffset : kQ4KQuantsOffset;
            const auto load16 = [](const uint8_t* at) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(at)); };
            const __m128i raw = load16(block + kQuants + 32 * (j / 2) + 16 * half);
            if constexpr (kQ5) {
              r[s] = q5k_values(raw, load16(block + kQ5KHighBitsOffset + 16 * half), j);
            } else {
              const __m128i u = j % 2 == 0 ? _mm_and_si128(raw, low) : _mm_and_si128(_mm_srli_epi16(raw, 4), low);
              r[s] = _mm_sub_epi8(u, eight);
            }
          }
          __m256i cols0_7, cols8_15;
          interleave_rows(r, &cols0_7, &cols8_15);
          _mm256_storeu_si256(out + (2 * half + 0) * kGradChunks + k, cols0_7);
          _mm256_storeu_si256(out + (2 * half + 1) * kGradChunks + k, cols8_15);
        }
      }
    }
  }
}

// pack_grad_tiles for Q6_K (kFull as above): the values q - 32 of each block's two halves,
// 4 rows interleaved as Q8_0's; the scales d sc of each half (two parts per block).
template <bool kFull>
void pack_grad_q6k_tiles_kind(const TiledMatrix& m, int64_t rb, int64_t b0, int64_t b1, GradPanel& p) {
  const size_t row_bytes = m.block_bytes * static_cast<size_t>(m.n_blocks());
  constexpr int64_t kGroups = kGradRowBlock / kTileRows;
  for (int64_t b = b0; b < b1; ++b) {
    const int j = static_cast<int>(b % 8);
    __m256i* out = reinterpret_cast<__m256i*>(p.q.data() + (b - b0) * kGradPanelBlockBytes);
    float* scales = p.rho.data() + (b - b0) * 2 * kGradRowBlock;  // two parts
    for (int64_t gi = 0; gi < kGroups; ++gi) {
      const int64_t g = rb * kGroups + gi;
      const int64_t nr = kFull ? kTileRows : g * kTileRows < m.rows ? m.group_rows(g) : 0;
      const uint8_t* tile = nr > 0 ? m.tile(g, b / 8) : nullptr;
      if (nr > 0 && (j == 0 || b == b0))
        prefetch_ahead(tile, kGroups * kTileRows * row_bytes, static_cast<size_t>(nr) * m.block_bytes);
      for (int64_t i = 0; i < kTileRows; ++i) {
        const bool valid = kFull || i < nr;
        const uint8_t* block = valid ? tile + static_cast<size_t>(i) * m.block_bytes : nullptr;
        const float d = valid ? q6k_d(block) : 0.0f;
        for (int h = 0; h < 2; ++h)
          scales[h * kGradRowBlock + 8 * gi + i] = valid ? d * static_cast<float>(q6k_scale(block, 2 * j + h)) : 0.0f;
      }
      for (int64_t k = 2 * gi; k < 2 * gi + 2; ++k) {  // chunk k: rows 4k .. 4k+3 of the row block
        const int64_t i0 = 4 * (k - 2 * gi);
        for (int half = 0; half < 2; ++half) {
          __m128i r[4];
          for (int64_t s = 0; s < 4; ++s) {
            if (!kFull && i0 + s >= nr) {
              r[s] = _mm_setzero_si128();
              continue;
            }
            __m128i ql, qh;
            q6k_bytes(tile + static_cast<size_t>(i0 + s) * m.block_bytes, j, half, &ql, &qh);
            r[s] = q6k_values(ql, qh, j);
          }
          __m256i cols0_7, cols8_15;
          interleave_rows(r, &cols0_7, &cols8_15);
          _mm256_storeu_si256(out + (2 * half + 0) * kGradChunks + k, cols0_7);
          _mm256_storeu_si256(out + (2 * half + 1) * kGradChunks + k, cols8_15);
        }
      }
    }
  }
}

void pack_grad_tiles_avx2(const TiledMatrix& m, int64_t rb, int64_t b0, int64_t b1, GradPanel& p) {
  const bool q4 = m.type == QType::Q4_0, full = (rb + 1) * kGradRowBlock <= m.rows;
  if (m.type == QType::Q6_K) {
    p.kind = Int8Kind::Signed6;
    p.resize(b1 - b0, 2);
    full ? pack_grad_q6k_tiles_kind<true>(m, rb, b0, b1, p) : pack_grad_q6k_tiles_kind<false>(m, rb, b0, b1, p);
    normalize_grad_scales_avx2(p);
    return;
  }
  if (m.type == QType::Q4_K || m.type == QType::Q5_K) {
    const bool q5 = m.type == QType::Q5_K;
    p.kind = kquant_kind(m.type);
    p.resize(b1 - b0);
    if (q5)
      full ? pack_grad_kquant_tiles_kind<true, true>(m, rb, b0, b1, p)
           : pack_grad_kquant_tiles_kind<true, false>(m, rb, b0, b1, p);
    else
      full ? pack_grad_kquant_tiles_kind<false, true>(m, rb, b0, b1, p)
           : pack_grad_kquant_tiles_kind<false, false>(m, rb, b0, b1, p);
    normalize_grad_scales_avx2(p);
    return;
  }
  p.kind = legacy_tile_kind(m);
  p.resize(b1 - b0);
  if (q4)
    full ? pack_grad_tiles_kind<true, true>(m, rb, b0, b1, p) : pack_grad_tiles_kind<true, false>(m, rb, b0, b1, p);
  else
    full ? pack_grad_tiles_kind<false, true>(m, rb, b0, b1, p) : pack_grad_tiles_kind<false, false>(m, rb, b0, b1, p);
  normalize_grad_scales_avx2(p);
}

// One 4-byte chunk of a dot product into the running sums, unsigned bytes u times signed
// bytes s: Q4_0 nibbles times signed activations (forward) or unsigned activations q + 128
// times Q4_0's values u - 8 (input gradient). With VNNI int32 sums of the four products;
// without it the sums stay int16 pairs, exact for at most 8 chunks of these operands
// (8 x 2 x 15 x 128 and 8 x 2 x 255 x 8 < 2^15; finish with unsigned_sums).
inline __m256i dot_unsigned_chunk(__m256i sums, __m256i u, __m256i s) {
#if NL_INT8_VNNI
  return dpbusd(sums, u, s);
#else
  return _mm256_add_epi16(sums, _mm256_maddubs_epi16(u, s));
#endif
}
// |w| times sign(q, w) for signed panels: widened per chunk without VNNI.
inline __m256i dot_signed_chunk(__m256i sums, __m256i abs_w, __m256i signed_q) {
#if NL_INT8_VNNI
  return dpbusd(sums, abs_w, signed_q);
#else
  return _mm256_add_epi32(sums, _mm256_madd_epi16(_mm256_maddubs_epi16(abs_w, signed_q), _mm256_set1_epi16(1)));
#endif
}

// An empty asm that takes v in a register, so each sum is built chunk by chunk, in order.
inline void keep_in_register(__m256i& v) { asm("" : "+x"(v)); }

// The integer sums of one panel block (8 chunk registers at w) with NT tokens' activation
// blocks (token t's 32 bytes at x + t * ldx). Each weight chunk is loaded once for the NT
// tokens. Nibble panels leave int16 pair sums without VNNI (finish with unsigned_sums), int32
// with it; signed ones int32.
// The sums are pinned (keep_in_register): otherwise GCC reassociates each token's 8-term
// sum into a tree, issues all 32 products first and spills them and the f32 accumulators to
// the stack. Measured: the forward 8-10% faster on Zen 1; the input gradient of Q8_0 panels
// (Zen 5, 64 tokens x 256 columns) 17% with VNNI and 5-10% without.
// Signed panels with kUnsignedActivations and kFlip: the activations (signed) are flipped to
// q + 128 after the broadcast and the sums are those of q + 128 (subtract wsum).
// kChunks: 8 (a forward block's 32 columns) or kGradChunks (an input-gradient row block).
template <int NT, Int8Kind K, bool kFlip = false, int kChunks = 8>
inline void dot_tokens(const __m256i* w, const int8_t* x, int64_t ldx, __m256i part[NT]) {
  static_assert(!kFlip || (K == Int8Kind::Signed && kUnsignedActivations), "flipped activations need vpdpbusd");
  static_assert(K == Int8Kind::Signed || kChunks <= 8 || NL_INT8_VNNI, "int16 pair sums hold 8 chunks");
  for (int t = 0; t < NT; ++t) part[t] = _mm256_setzero_si256();
  for (int c = 0; c < kChunks; ++c) {
    const __m256i wc = _mm256_loadu_si256(w + c);
    const int64_t xc_at = 4 * c;
    if constexpr (kFlip) {
#if NL_INT8_VNNI
      for (int t = 0; t < NT; ++t) {
        part[t] = dpbusd(part[t], flip_to_unsigned(broadcast_chunk(x + t * ldx + xc_at)), wc);
        keep_in_register(part[t]);
      }
#endif
    } else if constexpr (K == Int8Kind::Nibble) {
      for (int t = 0; t < NT; ++t) {
        part[t] = dot_unsigned_chunk(part[t], wc, broadcast_chunk(x + t * ldx + xc_at));
        keep_in_register(part[t]);
      }
    } else {
      const __m256i aw = _mm256_sign_epi8(wc, wc);
      for (int t = 0; t < NT; ++t) {
        part[t] = dot_signed_chunk(part[t], aw, _mm256_sign_epi8(broadcast_chunk(x + t * ldx + xc_at), wc));
        keep_in_register(part[t]);
      }
    }
  }
}

// The integer sums of two nibble panels' blocks (8 chunk registers each, at w0 and w1: two
// column groups of an input-gradient panel, or two row groups' forward panels) with NT
// tokens: each activation chunk is broadcast once for both.
// Measured on Zen 1: these loops are bound by the broadcasts and other vector operations
// issued, not by the multiplies (vpmaddubsw+vpaddw alone from registers run 40% faster than
// with a broadcast per multiply), and sharing the broadcasts, with the sums pinned and the
// loops unrolled, makes the input gradient 8-10% faster and the forward 7-9%. (Signed panels
// use it only with kUnsignedX: the sign trick's operations depend on the weights.)
// kUnsignedX: the panels are signed and the activations unsigned
// (dot_unsigned_chunk: with VNNI any signed panel, without it only input-gradient Q4_0
// ones), stored so or, with kFlip (VNNI), flipped after the broadcast.
// The sums start from start0 and start1 (zero by default). kChunks as dot_tokens's (more
// than 8 only with VNNI: without it the int16 pair sums hold 8 chunks).
// kBias16: 16 is added to every weight byte after the load (Signed5 panels without VNNI).
template <int NT, bool kUnsignedX = false, bool kFlip = false, int kChunks = 8, bool kBias16 = false>
inline void dot_tokens_column_pair(const __m256i* w0, const __m256i* w1, const int8_t* x, int64_t ldx,
                                   __m256i part0[NT], __m256i part1[NT], __m256i start0 = _mm256_setzero_si256(),
                                   __m256i start1 = _mm256_setzero_si256()) {
  static_assert(!kFlip || (kUnsignedX && (NL_INT8_VNNI || kChunks <= 2)),
                "only unsigned activations are flipped, with vpdpbusd or in Signed6's runs of 2 chunks");
  static_assert(kChunks <= 8 || NL_INT8_VNNI, "int16 pair sums hold 8 chunks");
  for (int t = 0; t < NT; ++t) {
    part0[t] = start0;
    part1[t] = start1;
  }
#pragma GCC unroll 16
  for (int c = 0; c < kChunks; ++c) {
    __m256i a = _mm256_loadu_si256(w0 + c), b = _mm256_loadu_si256(w1 + c);
    if constexpr (kBias16) {
      a = _mm256_add_epi8(a, _mm256_set1_epi8(16));
      b = _mm256_add_epi8(b, _mm256_set1_epi8(16));
    }
    const int64_t xc_at = 4 * c;
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) {
      __m256i xc = broadcast_chunk(x + t * ldx + xc_at);
      if constexpr (kFlip) xc = flip_to_unsigned(xc);
      if constexpr (kUnsignedX) {  // unsigned activations x signed weights
        part0[t] = dot_unsigned_chunk(part0[t], xc, a);
        part1[t] = dot_unsigned_chunk(part1[t], xc, b);
      } else {
        part0[t] = dot_unsigned_chunk(part0[t], a, xc);
        part1[t] = dot_unsigned_chunk(part1[t], b, xc);
      }
      keep_in_register(part0[t]);
      keep_in_register(part1[t]);
    }
  }
}

// The int32 dot products from dot_unsigned_chunk's sums, less the offset its unsigned
// operand brings: forward nibble panels hold u = value + 8, so sum (u - 8) q = sum u q -
// 8 sum q (offset = 8 sum q in every lane); the input gradient's activations are q + 128,
// so the offset is 128 x each column's weight sum (GradPass::colsum).
inline __m256i unsigned_sums(__m256i part, __m256i offset) {
#if NL_INT8_VNNI
  return _mm256_sub_epi32(part, offset);
#else
  return _mm256_sub_epi32(_mm256_madd_epi16(part, _mm256_set1_epi16(1)), offset);
#endif
}
template <Int8Kind K>
inline __m256i finish_sums(__m256i part, int32_t sum_q) {
  if constexpr (K == Int8Kind::Nibble) return unsigned_sums(part, _mm256_set1_epi32(8 * sum_q));
  return part;
}

// Stores the first nr lanes of v at y.
inline void store_rows(float* y, __m256 v, int64_t nr) {
  if (nr == 8) {
    _mm256_storeu_ps(y, v);
    return;
  }
  float tmp[8];
  _mm256_storeu_ps(tmp, v);
  std::memcpy(y, tmp, static_cast<size_t>(nr) * sizeof(float));
}

// NT tokens x the panel's 8 rows. Each weight chunk is loaded once and used for the NT
// tokens; per token the block's sums stay in one register (int16 for nibbles).
template <int NT, Int8Kind K>
inline void forward_tokens(const int8_t* q, const float* d, const int32_t* sum, int64_t ldq, const ForwardPanel& p,
                           int64_t nr, float* Y, int64_t ldy) {
  const int64_t blocks = ldq / kQ8Block;
  __m256 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
  constexpr bool kFlip = K == Int8Kind::Signed && kUnsignedActivations;
  for (int64_t b = 0; b < p.blocks; ++b) {
    __m256i part[NT];
    dot_tokens<NT, K, kFlip>(reinterpret_cast<const __m256i*>(p.q.data() + b * 256), q + b * kQ8Block, ldq,
                                    part);
    const __m256 dw = _mm256_loadu_ps(p.d.data() + b * 8);
    for (int t = 0; t < NT; ++t) {
      const __m256i isum =
          kFlip ? _mm256_sub_epi32(part[t], _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p.wsum.data() + b * 8)))
                : finish_sums<K>(part[t], sum[t * blocks + b]);
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(dw, _mm256_set1_ps(d[t * blocks + b])), acc[t]);
    }
  }
  for (int t = 0; t < NT; ++t) store_rows(Y + t * ldy, acc[t], nr);
}

template <Int8Kind K>
void forward_kind(const int8_t* q, const float* d, const int32_t* sum, int64_t ldq, int64_t nt, const ForwardPanel& p,
                  int64_t nr, float* Y, int64_t ldy) {
  const int64_t blocks = ldq / kQ8Block;
  int64_t t = 0;
  for (; t + 4 <= nt; t += 4)
    forward_tokens<4, K>(q + t * ldq, d + t * blocks, sum + t * blocks, ldq, p, nr, Y + t * ldy, ldy);
  for (; t < nt; ++t)
    forward_tokens<1, K>(q + t * ldq, d + t * blocks, sum + t * blocks, ldq, p, nr, Y + t * ldy, ldy);
}

void forward_pair_avx2(const int8_t* q, const float* d, const int32_t* sum, int64_t ldq, int64_t nt,
                       const ForwardPanel& p0, const ForwardPanel& p1, int64_t nr1, float* Y, int64_t ldy);

void forward_avx2(const int8_t* q, const float* d, const int32_t* sum, int64_t ldq, int64_t nt, const ForwardPanel& p,
                  int64_t nr, float* Y, int64_t ldy) {
  if ((!NL_INT8_VNNI && p.kind == Int8Kind::Signed5) || p.kind == Int8Kind::Signed6) {
    // (The pair kernel with no rows of the second panel stored: one row group's work twice,
    // only for a matrix's odd last group.)
    if (nr == 8) {
      forward_pair_avx2(q, d, sum, ldq, nt, p, p, 0, Y, ldy);
      return;
    }
    const int64_t blocks = ldq / kQ8Block;
    constexpr int64_t kTokens = 16;
    float tmp[kTokens * 16];
    for (int64_t t0 = 0; t0 < nt; t0 += kTokens) {
      const int64_t n = std::min(kTokens, nt - t0);
      forward_pair_avx2(q + t0 * ldq, d + t0 * blocks, sum + t0 * blocks, ldq, n, p, p, 0, tmp, 16);
      for (int64_t t = 0; t < n; ++t)
        std::memcpy(Y + (t0 + t) * ldy, tmp + t * 16, static_cast<size_t>(nr) * sizeof(float));
    }
    return;
  }
  if (p.kind == Int8Kind::Nibble)
    forward_kind<Int8Kind::Nibble>(q, d, sum, ldq, nt, p, nr, Y, ldy);
  else
    forward_kind<Int8Kind::Signed>(q, d, sum, ldq, nt, p, nr, Y, ldy);
}

// NT tokens x two panels of kind K (16 rows, the last nr1 of p1's valid; signed ones only with
// kUnsignedActivations): forward_tokens with each activation chunk broadcast once for both
// panels (dot_tokens_column_pair; measured on Zen 1, 7-9% faster than two passes).
template <int NT, Int8Kind K>
inline void forward_tokens_pair(const int8_t* q, const float* d, const int32_t* sum, int64_t ldq,
                                const ForwardPanel& p0, const ForwardPanel& p1, int64_t nr1, float* Y, int64_t ldy) {
  const int64_t blocks = ldq / kQ8Block;
  __m256 acc0[NT], acc1[NT];
  for (int t = 0; t < NT; ++t) acc0[t] = acc1[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < p0.blocks; ++b) {
    constexpr bool kSigned = K == Int8Kind::Signed;
    __m256i part0[NT], part1[NT];
    dot_tokens_column_pair<NT, kSigned, kSigned>(reinterpret_cast<const __m256i*>(p0.q.data() + b * 256),
                                                        reinterpret_cast<const __m256i*>(p1.q.data() + b * 256),
                                                        q + b * kQ8Block, ldq, part0, part1);
    const __m256 dw0 = _mm256_loadu_ps(p0.d.data() + b * 8), dw1 = _mm256_loadu_ps(p1.d.data() + b * 8);
    for (int t = 0; t < NT; ++t) {
      const __m256 dx = _mm256_set1_ps(d[t * blocks + b]);
      __m256i isum0, isum1;
      if constexpr (kSigned) {
        isum0 = _mm256_sub_epi32(part0[t], _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p0.wsum.data() + b * 8)));
        isum1 = _mm256_sub_epi32(part1[t], _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p1.wsum.data() + b * 8)));
      } else {
        isum0 = finish_sums<K>(part0[t], sum[t * blocks + b]);
        isum1 = finish_sums<K>(part1[t], sum[t * blocks + b]);
      }
      acc0[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum0), _mm256_mul_ps(dw0, dx), acc0[t]);
      acc1[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum1), _mm256_mul_ps(dw1, dx), acc1[t]);
    }
  }
  for (int t = 0; t < NT; ++t) {
    _mm256_storeu_ps(Y + t * ldy, acc0[t]);
    store_rows(Y + t * ldy + 8, acc1[t], nr1);
  }
}

#if NL_INT8_VNNI_EVEX
// The AVX-512 form of forward_tokens_pair: one 512-bit register holds chunk c of both
// panels (lanes 0-7 p0's rows, 8-15 p1's), so each activation broadcast feeds one vpdpbusd
// for 16 rows instead of two, and the f32 tail (conversion, scale, fused multiply-add) runs
// once per 16 rows. The same integers and the same f32 chain per output as the 256-bit code.
// 32 registers: NT = 8 tokens keep their 8 partial sums and 8 accumulators in registers.
inline __m512i join_halves(const void* lo, const void* hi) {
  // (The masked forms with every lane selected, here and in to_float: the plain intrinsics
  // pass an undefined vector that GCC 12 warns about, -Wmaybe-uninitialized.)
  const __m512i a = _mm512_maskz_loadu_epi32(0x00FF, lo);  // lo's 32 bytes, the upper half zero
  return _mm512_mask_inserti64x4(a, 0xFF, a, _mm256_loadu_si256(static_cast<const __m256i*>(hi)), 1);
}
inline __m512 to_float(__m512i v) { return _mm512_maskz_cvtepi32_ps(0xFFFF, v); }
inline void keep_in_register(__m512i& v) { asm("" : "+v"(v)); }

template <int NT, Int8Kind K>
inline void forward_tokens_pair512(const int8_t* q, const float* d, const int32_t* sum, int64_t ldq,
                                   const ForwardPanel& p0, const ForwardPanel& p1, int64_t nr1, float* Y,
                                   int64_t ldy) {
  constexpr bool kSigned = K == Int8Kind::Signed;
  const int64_t blocks = ldq / kQ8Block;
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  __m512 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < p0.blocks; ++b) {
    __m512i part[NT];
    for (int t = 0; t < NT; ++t) part[t] = _mm512_setzero_si512();
    const uint8_t *w0 = p0.q.data() + b * 256, *w1 = p1.q.data() + b * 256;
    const int8_t* x = q + b * kQ8Block;
#pragma GCC unroll 8
    for (int c = 0; c < 8; ++c) {
      const __m512i w = join_halves(w0 + 32 * c, w1 + 32 * c);
      for (int t = 0; t < NT; ++t) {
        int32_t v;
        std::memcpy(&v, x + t * ldq + 4 * c, 4);
        const __m512i xc = _mm512_set1_epi32(v);
        // Signed panels: unsigned activations q + 128 against the signed weights (wsum
        // below); nibble panels: unsigned nibbles against the signed activations.
        part[t] = kSigned ? _mm512_dpbusd_epi32(part[t], _mm512_xor_si512(xc, flip), w)
                          : _mm512_dpbusd_epi32(part[t], w, xc);
        keep_in_register(part[t]);
      }
    }
    const __m512 dw = _mm512_castsi512_ps(join_halves(p0.d.data() + b * 8, p1.d.data() + b * 8));
    const __m512i wsum = kSigned ? join_halves(p0.wsum.data() + b * 8, p1.wsum.data() + b * 8) : _mm512_setzero_si512();
    for (int t = 0; t < NT; ++t) {
      const __m512i offset = kSigned ? wsum : _mm512_set1_epi32(8 * sum[t * blocks + b]);
      const __m512i isum = _mm512_sub_epi32(part[t], offset);
      acc[t] = _mm512_fmadd_ps(to_float(isum), _mm512_mul_ps(dw, _mm512_set1_ps(d[t * blocks + b])), acc[t]);
    }
  }
  const __mmask16 rows = static_cast<__mmask16>(0xFFu | (((1u << nr1) - 1u) << 8));
  for (int t = 0; t < NT; ++t) _mm512_mask_storeu_ps(Y + t * ldy, rows, acc[t]);
}
#endif

#if !NL_INT8_VNNI
// Two Signed5 panels (Q5_K's values v = q - 16) without VNNI, as forward_tokens_pair takes
// nibbles: u = v + 16 in [0, 31] against the signed activations, sum v q = sum u q - 16 sum q,
// each activation broadcast shared by both panels. Pairs of products reach 2 x 31 x 128, so
// the int16 sums hold 4 chunks (not 8): each block's are widened twice. Two tokens at a time
// (with three the int32 sums of the first half spill).
template <int NT>
inline void forward_tokens_pair5(const int8_t* q, const float* d, const int32_t* sum, int64_t ldq,
                                 const ForwardPanel& p0, const ForwardPanel& p1, int64_t nr1, float* Y, int64_t ldy) {
  const int64_t blocks = ldq / kQ8Block;
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc0[NT], acc1[NT];
  for (int t = 0; t < NT; ++t) acc0[t] = acc1[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < p0.blocks; ++b) {
    const __m256i* w0 = reinterpret_cast<const __m256i*>(p0.q.data() + b * 256);
    const __m256i* w1 = reinterpret_cast<const __m256i*>(p1.q.data() + b * 256);
    __m256i s0[NT], s1[NT], h0[NT], h1[NT];
    dot_tokens_column_pair<NT, false, false, 4, true>(w0, w1, q + b * kQ8Block, ldq, s0, s1);
    for (int t = 0; t < NT; ++t) {
      s0[t] = _mm256_madd_epi16(s0[t], ones);
      s1[t] = _mm256_madd_epi16(s1[t], ones);
    }
    dot_tokens_column_pair<NT, false, false, 4, true>(w0 + 4, w1 + 4, q + b * kQ8Block + 16, ldq, h0, h1);
    const __m256 dw0 = _mm256_loadu_ps(p0.d.data() + b * 8), dw1 = _mm256_loadu_ps(p1.d.data() + b * 8);
    for (int t = 0; t < NT; ++t) {
      const __m256 dx = _mm256_set1_ps(d[t * blocks + b]);
      const __m256i offset = _mm256_set1_epi32(16 * sum[t * blocks + b]);
      const __m256i isum0 = _mm256_sub_epi32(_mm256_add_epi32(s0[t], _mm256_madd_epi16(h0[t], ones)), offset);
      const __m256i isum1 = _mm256_sub_epi32(_mm256_add_epi32(s1[t], _mm256_madd_epi16(h1[t], ones)), offset);
      acc0[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum0), _mm256_mul_ps(dw0, dx), acc0[t]);
      acc1[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum1), _mm256_mul_ps(dw1, dx), acc1[t]);
    }
  }
  for (int t = 0; t < NT; ++t) {
    _mm256_storeu_ps(Y + t * ldy, acc0[t]);
    store_rows(Y + t * ldy + 8, acc1[t], nr1);
  }
}
#endif

// Two Signed6 panels (Q6_K): the activations unsigned, q + 128 (flipped after each broadcast,
// shared by both panels), against the signed values v = q - 32, less wsum (128 x the scaled
// sums of v), exact for every activation. Each half's sums are multiplied by its integer
// scales: without VNNI the products' pairs reach 2 x 255 x 32, so the int16 sums hold 2 chunks
// and vpmaddwd by the scale pairs multiplies and widens each run; with VNNI (int32 sums of a
// half's 4 chunks) vpmulld.
template <int NT>
inline void forward_tokens_pair6(const int8_t* q, const float* d, int64_t ldq, const ForwardPanel& p0,
                                 const ForwardPanel& p1, int64_t nr1, float* Y, int64_t ldy) {
  constexpr int kRun = NL_INT8_VNNI ? 4 : 2;
  const int64_t blocks = ldq / kQ8Block;
  __m256 acc0[NT], acc1[NT];
  for (int t = 0; t < NT; ++t) acc0[t] = acc1[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < p0.blocks; ++b) {
    const __m256i* w0 = reinterpret_cast<const __m256i*>(p0.q.data() + b * 256);
    const __m256i* w1 = reinterpret_cast<const __m256i*>(p1.q.data() + b * 256);
    __m256i s0[NT], s1[NT];
    for (int r = 0; r < 8 / kRun; ++r) {
      __m256i r0[NT], r1[NT];
      dot_tokens_column_pair<NT, true, true, kRun>(w0 + kRun * r, w1 + kRun * r, q + b * kQ8Block + 4 * kRun * r, ldq,
                                                   r0, r1);
      const int h = r * kRun / 4;
      const auto scales = [&](const ForwardPanel& p) {
        return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p.sub_scales.data() + (b * 2 + h) * 8));
      };
      const __m256i pairs0 = scales(p0), pairs1 = scales(p1);
      for (int t = 0; t < NT; ++t) {
#if NL_INT8_VNNI
        const __m256i a = _mm256_mullo_epi32(r0[t], _mm256_srai_epi32(pairs0, 16));
        const __m256i c = _mm256_mullo_epi32(r1[t], _mm256_srai_epi32(pairs1, 16));
#else
        const __m256i a = _mm256_madd_epi16(r0[t], pairs0), c = _mm256_madd_epi16(r1[t], pairs1);
#endif
        s0[t] = r == 0 ? a : _mm256_add_epi32(s0[t], a);
        s1[t] = r == 0 ? c : _mm256_add_epi32(s1[t], c);
      }
    }
    const __m256 dw0 = _mm256_loadu_ps(p0.d.data() + b * 8), dw1 = _mm256_loadu_ps(p1.d.data() + b * 8);
    const __m256i ws0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p0.wsum.data() + b * 8));
    const __m256i ws1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p1.wsum.data() + b * 8));
    for (int t = 0; t < NT; ++t) {
      const __m256 dx = _mm256_set1_ps(d[t * blocks + b]);
      acc0[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(s0[t], ws0)), _mm256_mul_ps(dw0, dx), acc0[t]);
      acc1[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(s1[t], ws1)), _mm256_mul_ps(dw1, dx), acc1[t]);
    }
  }
  for (int t = 0; t < NT; ++t) {
    _mm256_storeu_ps(Y + t * ldy, acc0[t]);
    store_rows(Y + t * ldy + 8, acc1[t], nr1);
  }
}

template <Int8Kind K>
void forward_pair_kind(const int8_t* q, const float* d, const int32_t* sum, int64_t ldq, int64_t nt,
                       const ForwardPanel& p0, const ForwardPanel& p1, int64_t nr1, float* Y, int64_t ldy) {
  const int64_t blocks = ldq / kQ8Block;
  int64_t t = 0;
#if NL_INT8_VNNI_EVEX
  for (; t + 8 <= nt; t += 8)
    forward_tokens_pair512<8, K>(q + t * ldq, d + t * blocks, sum + t * blocks, ldq, p0, p1, nr1, Y + t * ldy, ldy);
  for (; t < nt; ++t)
    forward_tokens_pair512<1, K>(q + t * ldq, d + t * blocks, sum + t * blocks, ldq, p0, p1, nr1, Y + t * ldy, ldy);
  return;
#endif
  // 3 tokens at a time: their 6 accumulators and 6 partial sums, the two weight chunks and
  // a broadcast fit the 16 registers; with 4 tokens GCC spilled (measured on Zen 3, 2
  // threads, Q4_0 q/up/down of the three presets at 128 and 512 tokens: 1.01-1.11x faster,
  // median 1.05x).
  for (; t + 3 <= nt; t += 3)
    forward_tokens_pair<3, K>(q + t * ldq, d + t * blocks, sum + t * blocks, ldq, p0, p1, nr1, Y + t * ldy, ldy);
  for (; t < nt; ++t)
    forward_tokens_pair<1, K>(q + t * ldq, d + t * blocks, sum + t * blocks, ldq, p0, p1, nr1, Y + t * ldy, ldy);
}

void forward_pair_avx2(const int8_t* q, const float* d, const int32_t* sum, int64_t ldq, int64_t nt,
                       const ForwardPanel& p0, const ForwardPanel& p1, int64_t nr1, float* Y, int64_t ldy) {
  if (p0.kind == Int8Kind::Signed6 && p1.kind == Int8Kind::Signed6) {
    const int64_t blocks = ldq / kQ8Block;
    int64_t t = 0;
    for (; t + 2 <= nt; t += 2)
      forward_tokens_pair6<2>(q + t * ldq, d + t * blocks, ldq, p0, p1, nr1, Y + t * ldy, ldy);
    for (; t < nt; ++t) forward_tokens_pair6<1>(q + t * ldq, d + t * blocks, ldq, p0, p1, nr1, Y + t * ldy, ldy);
    return;
  }
  if (p0.kind == Int8Kind::Nibble && p1.kind == Int8Kind::Nibble) {
    forward_pair_kind<Int8Kind::Nibble>(q, d, sum, ldq, nt, p0, p1, nr1, Y, ldy);
    return;
  }
  if constexpr (kUnsignedActivations) {
    if (is_signed(p0.kind) && is_signed(p1.kind)) {  // (Signed5 panels are signed ones to vpdpbusd)
      forward_pair_kind<Int8Kind::Signed>(q, d, sum, ldq, nt, p0, p1, nr1, Y, ldy);
      return;
    }
  } else if (p0.kind == Int8Kind::Signed5 && p1.kind == Int8Kind::Signed5) {
#if !NL_INT8_VNNI
    const int64_t blocks = ldq / kQ8Block;
    int64_t t = 0;
    for (; t + 2 <= nt; t += 2)
      forward_tokens_pair5<2>(q + t * ldq, d + t * blocks, sum + t * blocks, ldq, p0, p1, nr1, Y + t * ldy, ldy);
    for (; t < nt; ++t)
      forward_tokens_pair5<1>(q + t * ldq, d + t * blocks, sum + t * blocks, ldq, p0, p1, nr1, Y + t * ldy, ldy);
    return;
#endif
  }
  forward_pair_by_calls<forward_avx2>(q, d, sum, ldq, nt, p0, p1, nr1, Y, ldy);  // (sign operations not shared)
}

// grad_rows (kernels_int8.h) with the scalar's arithmetic (the max is exact in any order,
// the products and roundings are the same); the tail block goes through the definition.
void grad_rows_avx2(const float* g, int64_t n, float* ey, int16_t* y, int64_t ldb) {
  int64_t R = 0;
  constexpr int kRegs = kGradRowBlock / 8;
  for (; (R + 1) * kGradRowBlock <= n; ++R) {
    __m256 v[kRegs];
    for (int k = 0; k < kRegs; ++k) v[k] = _mm256_loadu_ps(g + R * kGradRowBlock + 8 * k);
    ey[R] = max_abs<kRegs>(v) / 127.0f;
    const __m256 inv = _mm256_set1_ps(ey[R] != 0.0f ? 1.0f / ey[R] : 0.0f), k256 = _mm256_set1_ps(256.0f);
    for (int k = 0; k < kRegs; ++k) v[k] = _mm256_mul_ps(_mm256_mul_ps(v[k], inv), k256);
    for (int h = 0; h < kRegs / 4; ++h) store_int16(v + 4 * h, y + R * ldb + 32 * h);
  }
  if (R * kGradRowBlock < n)
    int8_kernels_scalar().grad_rows(g + R * kGradRowBlock, n - R * kGradRowBlock, ey + R, y + R * ldb, ldb);
}

// Where the sums of an input-gradient call start from (GradOut::acc): nothing (0), D itself,
// or another block A. Each is its own instantiation with plain pointer arguments: with a
// GradOut and a null test in the loop GCC spilled, and the input gradient ran 1.3x slower
// (Zen 3, one thread, Q4_0, 256 tokens); with A and D apart in every call, up to 10%.
enum class GradStart { Zero, InPlace, Apart };

// D[t, c0 .. c0+8) = start + e[t] * isum[t] (the dot products of one column group), for NT
// tokens (columns from n on are left alone).
template <int NT, GradStart S>
inline void add_column_group(const __m256i isum[NT], const __m256 ev[NT], int64_t c0, int64_t n, const float* A,
                             int64_t lda, float* D, int64_t ldd) {
  if (c0 >= n) return;
  constexpr bool kAcc = S != GradStart::Zero;
  for (int t = 0; t < NT; ++t) {
    float* d = D + t * ldd + c0;
    const float* acc = S == GradStart::Apart ? A + t * lda + c0 : d;
    if (c0 + 8 <= n) {
      const __m256 a = kAcc ? _mm256_loadu_ps(acc) : _mm256_setzero_ps();
      _mm256_storeu_ps(d, _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), ev[t], a));
    } else {
      float tmp[8] = {};
      if (kAcc) std::memcpy(tmp, acc, static_cast<size_t>(n - c0) * sizeof(float));
      _mm256_storeu_ps(tmp, _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), ev[t], _mm256_loadu_ps(tmp)));
      std::memcpy(d, tmp, static_cast<size_t>(n - c0) * sizeof(float));
    }
  }
}

// The requantized dY of one token for one pass of scale blocks [s0, s0 + ns)
// (ns <= kGradBlocksPerPass; GradPanel::parts) of a row block: the quants of scale block s at
// qv + 64 s (as q + 128 with kUnsigned), in order, its scale in e[s]. requantize_grad_value with
// vpmulhrsw: each 32 values of y16 and of the pass's rho16 are split into values 0-7 and
// 16-23 (a) and 8-15 and 24-31 (b), so the per-lane pack of a and b gives them in order.
inline constexpr int64_t kGradBlocksPerPass = 8;
inline constexpr int kGradHalves = kGradRowBlock / 32;  // 32-value parts of a row block
template <bool kUnsigned>
inline void requantize_grad_token(const int16_t* y16, float ey, const int16_t (*rho)[kGradRowBlock],
                                  const GradPanel& p, int64_t s0, int64_t ns, int8_t* qv, float* e) {
  __m256i a[kGradHalves], b[kGradHalves];
  for (int h = 0; h < kGradHalves; ++h) {
    const __m256i v0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y16 + 32 * h));
    const __m256i v1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y16 + 32 * h + 16));
    a[h] = _mm256_permute2x128_si256(v0, v1, 0x20), b[h] = _mm256_permute2x128_si256(v0, v1, 0x31);
  }
  const __m256i k256 = _mm256_set1_epi16(256);
  for (int64_t i = 0; i < ns; ++i) {
    const __m256i* r = reinterpret_cast<const __m256i*>(rho[i]);
    for (int h = 0; h < kGradHalves; ++h) {
      const __m256i qa = _mm256_mulhrs_epi16(_mm256_mulhrs_epi16(a[h], _mm256_load_si256(r + 2 * h)), k256);
      const __m256i qb = _mm256_mulhrs_epi16(_mm256_mulhrs_epi16(b[h], _mm256_load_si256(r + 2 * h + 1)), k256);
      __m256i packed = _mm256_packs_epi16(qa, qb);
      if constexpr (kUnsigned) packed = flip_to_unsigned(packed);
      _mm256_store_si256(reinterpret_cast<__m256i*>(qv + i * kGradRowBlock + 32 * h), packed);
    }
  }
  if (ns == kGradBlocksPerPass) {
    _mm256_storeu_ps(e, _mm256_mul_ps(_mm256_set1_ps(ey), _mm256_loadu_ps(p.m.data() + s0)));
  } else {
    for (int64_t i = 0; i < ns; ++i) e[i] = ey * p.m[static_cast<size_t>(s0 + i)];
  }
}

// The requantized dY of a chunk of tokens for one pass (requantize_grad_token, token t's
// row of each array at index t).
inline constexpr int64_t kGradChunkTokens = 32;
// A pass covers kGradBlocksPerPass scale blocks: that many column blocks, or half as many
// with two parts each (Signed6).
struct GradPass {
  alignas(32) int8_t qv[kGradChunkTokens][kGradBlocksPerPass * kGradRowBlock];  // per scale block
  float e[kGradChunkTokens][kGradBlocksPerPass];
  alignas(32) int16_t rho[kGradBlocksPerPass][kGradRowBlock];  // rho16, split as requantize_grad_token's a, b
  __m256i colsum[kGradBlocksPerPass][4];  // 128 x the column sums of the weights, per block and group
};

// pass.rho for the panel's column blocks [b0, b0 + nb) (their kParts scale blocks each) and,
// with kColumnSums, pass.colsum: per column, 128 x the sum of the row block's weights.
template <bool kColumnSums, int kParts>
inline void prepare_pass(const GradPanel& p, int64_t b0, int64_t nb, GradPass& pass) {
  for (int64_t s = 0; s < nb * kParts; ++s) {
    const __m256i* r = reinterpret_cast<const __m256i*>(p.rho16.data() + (b0 * kParts + s) * kGradRowBlock);
    __m256i* out = reinterpret_cast<__m256i*>(pass.rho[s]);
    for (int h = 0; h < kGradHalves; ++h) {
      const __m256i v0 = _mm256_loadu_si256(r + 2 * h), v1 = _mm256_loadu_si256(r + 2 * h + 1);
      _mm256_store_si256(out + 2 * h, _mm256_permute2x128_si256(v0, v1, 0x20));
      _mm256_store_si256(out + 2 * h + 1, _mm256_permute2x128_si256(v0, v1, 0x31));
    }
  }
  for (int64_t b = 0; b < nb; ++b) {
    if constexpr (kColumnSums) {
      const __m256i* w = reinterpret_cast<const __m256i*>(p.q.data() + (b0 + b) * kGradPanelBlockBytes);
      for (int cg = 0; cg < 4; ++cg) pass.colsum[b][cg] = chunk_sums_x128<kGradChunks>(w + cg * kGradChunks);
    }
  }
}

// Unsigned activations (q + 128) go with every Q4_0 panel and, with VNNI, with every
// signed one; without VNNI signed panels use the sign trick (dot_tokens) on signed ones.
template <Int8Kind K>
inline constexpr bool kUnsignedGradActivations = K == Int8Kind::Nibble || kUnsignedActivations;

// The products of one pass for NT tokens (rows of `pass` from t), D[t, c] += for the pass's
// columns below n. Each weight chunk is loaded once and used for the NT tokens, whose
// activation chunks are broadcast from the pass (as the forward kernel does). Per output the
// arithmetic is the definition's, in its order: bit-identical to scalar.
// kRun: without VNNI, the chunks summed in int16 before each widening (8 of Q4_0's values,
// 4 of Signed5 panels': 4 x 2 x 255 x 16 < 2^15, 2 of Signed6's). kParts: the panel's scale
// parts (GradPanel::parts): with 2, column groups 0-1 and 2-3 take their own requantized dY.
template <int NT, Int8Kind K, GradStart S, int kRun = 8, int kParts = 1>
inline void grad_pass_products(const GradPass& pass, int64_t t, const GradPanel& p, int64_t b0, int64_t nb, int64_t n,
                               const float* A, int64_t lda, float* D, int64_t ldd) {
  for (int64_t b = 0; b < nb; ++b) {
    __m256 ev[NT];  // per token, shared by the block's (or part's) column groups
    const auto scale_block = [&](int64_t cg) { return b * kParts + cg * kParts / 4; };
    const auto set_scales = [&](int64_t s) {
      for (int i = 0; i < NT; ++i) ev[i] = _mm256_set1_ps(pass.e[t + i][s]);
    };
    set_scales(scale_block(0));
    const __m256i* w = reinterpret_cast<const __m256i*>(p.q.data() + (b0 + b) * kGradPanelBlockBytes);
    const int64_t c0 = (b0 + b) * kQ8Block, ldx = kGradBlocksPerPass * kGradRowBlock;
    if constexpr (kUnsignedGradActivations<K>) {
      for (int64_t cg = 0; cg < 4 && c0 + cg * 8 < n; cg += 2) {
        if (kParts > 1 && cg > 0) set_scales(scale_block(cg));
        const int8_t* x = &pass.qv[t][0] + scale_block(cg) * kGradRowBlock;
        const __m256i *w0 = w + cg * kGradChunks, *w1 = w + (cg + 1) * kGradChunks;
        __m256i part0[NT], part1[NT];
#if NL_INT8_VNNI  // int32 sums from the start: they begin at minus the offset, not subtract it per token
        const __m256i zero = _mm256_setzero_si256();
        dot_tokens_column_pair<NT, true, false, kGradChunks>(w0, w1, x, ldx, part0, part1,
                                                             _mm256_sub_epi32(zero, pass.colsum[b][cg]),
                                                             _mm256_sub_epi32(zero, pass.colsum[b][cg + 1]));
#else  // the int16 pair sums hold kRun chunks: per kRun, widened into the int32 sums
        dot_tokens_column_pair<NT, true, false, kRun>(w0, w1, x, ldx, part0, part1);
        for (int i = 0; i < NT; ++i) {
          part0[i] = unsigned_sums(part0[i], pass.colsum[b][cg]);
          part1[i] = unsigned_sums(part1[i], pass.colsum[b][cg + 1]);
        }
        for (int h = kRun; h < kGradChunks; h += kRun) {
          __m256i more0[NT], more1[NT];
          dot_tokens_column_pair<NT, true, false, kRun>(w0 + h, w1 + h, x + 4 * h, ldx, more0, more1);
          const __m256i ones = _mm256_set1_epi16(1);
          for (int i = 0; i < NT; ++i) {
            part0[i] = _mm256_add_epi32(part0[i], _mm256_madd_epi16(more0[i], ones));
            part1[i] = _mm256_add_epi32(part1[i], _mm256_madd_epi16(more1[i], ones));
          }
        }
#endif
        add_column_group<NT, S>(part0, ev, c0 + cg * 8, n, A, lda, D, ldd);
        add_column_group<NT, S>(part1, ev, c0 + (cg + 1) * 8, n, A, lda, D, ldd);
      }
    } else {
      for (int64_t cg = 0; cg < 4 && c0 + cg * 8 < n; ++cg) {
        if (kParts > 1 && cg == 2) set_scales(scale_block(cg));
        const int8_t* x = &pass.qv[t][0] + scale_block(cg) * kGradRowBlock;
        __m256i part[NT];
        dot_tokens<NT, K, false, kGradChunks>(w + cg * kGradChunks, x, ldx, part);
        add_column_group<NT, S>(part, ev, c0 + cg * 8, n, A, lda, D, ldd);
      }
    }
  }
}

#if NL_INT8_VNNI_EVEX
// D[t, c0 .. c0+16) = start + e[t] * isum[t] for the two column groups of one 512-bit
// register (columns from n on are left alone): add_column_group, 16 columns at a time.
template <int NT, GradStart S>
inline void add_column_group_pair(const __m512i isum[NT], const __m512 ev[NT], int64_t c0, int64_t n, const float* A,
                                  int64_t lda, float* D, int64_t ldd) {
  if (c0 >= n) return;
  const __mmask16 cols = n - c0 >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << (n - c0)) - 1u);
  for (int t = 0; t < NT; ++t) {
    float* d = D + t * ldd + c0;
    __m512 a = _mm512_setzero_ps();
    if constexpr (S == GradStart::InPlace) a = _mm512_maskz_loadu_ps(cols, d);
    if constexpr (S == GradStart::Apart) a = _mm512_maskz_loadu_ps(cols, A + t * lda + c0);
    _mm512_mask_storeu_ps(d, cols, _mm512_fmadd_ps(to_float(isum[t]), ev[t], a));
  }
}

// The AVX-512 form of grad_pass_products (the activations are unsigned, as with any VNNI
// panel): chunk c of the four column groups in two 512-bit registers (groups 0, 1 and 2, 3),
// so each activation broadcast feeds two vpdpbusd for 32 columns instead of four. The sums
// start at minus 128 x the column sums, as in the 256-bit code: the same integers.
// kParts 2 (Signed6): groups 0, 1 and 2, 3 take their own requantized dY (two broadcasts).
template <int NT, GradStart S, int kParts = 1>
inline void grad_pass_products512(const GradPass& pass, int64_t t, const GradPanel& p, int64_t b0, int64_t nb,
                                  int64_t n, const float* A, int64_t lda, float* D, int64_t ldd) {
  for (int64_t b = 0; b < nb; ++b) {
    const int64_t c0 = (b0 + b) * kQ8Block, ldx = kGradBlocksPerPass * kGradRowBlock;
    if (c0 >= n) break;
    const __m256i* w = reinterpret_cast<const __m256i*>(p.q.data() + (b0 + b) * kGradPanelBlockBytes);
    const int8_t* x = &pass.qv[t][0] + b * kParts * kGradRowBlock;
    const int8_t* x23 = x + (kParts - 1) * kGradRowBlock;
    const __m512i zero = _mm512_setzero_si512();
    const __m512i start01 = _mm512_sub_epi32(zero, join_halves(&pass.colsum[b][0], &pass.colsum[b][1]));
    const __m512i start23 = _mm512_sub_epi32(zero, join_halves(&pass.colsum[b][2], &pass.colsum[b][3]));
    __m512i part01[NT], part23[NT];
    for (int i = 0; i < NT; ++i) part01[i] = start01, part23[i] = start23;
#pragma GCC unroll 16
    for (int c = 0; c < kGradChunks; ++c) {
      const __m512i w01 = join_halves(w + c, w + kGradChunks + c);
      const __m512i w23 = join_halves(w + 2 * kGradChunks + c, w + 3 * kGradChunks + c);
      for (int i = 0; i < NT; ++i) {
        int32_t v, v23;
        std::memcpy(&v, x + i * ldx + 4 * c, 4);
        const __m512i xc = _mm512_set1_epi32(v);
        __m512i xc23 = xc;
        if constexpr (kParts > 1) {
          std::memcpy(&v23, x23 + i * ldx + 4 * c, 4);
          xc23 = _mm512_set1_epi32(v23);
        }
        part01[i] = _mm512_dpbusd_epi32(part01[i], xc, w01);
        part23[i] = _mm512_dpbusd_epi32(part23[i], xc23, w23);
        keep_in_register(part01[i]);
        keep_in_register(part23[i]);
      }
    }
    __m512 ev[NT];  // per token, shared by the block's four column groups (or two)
    for (int i = 0; i < NT; ++i) ev[i] = _mm512_set1_ps(pass.e[t + i][b * kParts]);
    add_column_group_pair<NT, S>(part01, ev, c0, n, A, lda, D, ldd);
    if constexpr (kParts > 1)
      for (int i = 0; i < NT; ++i) ev[i] = _mm512_set1_ps(pass.e[t + i][b * kParts + 1]);
    add_column_group_pair<NT, S>(part23, ev, c0 + 16, n, A, lda, D, ldd);
  }
}
#endif

// The two phases of input_grad_kind for one chunk of tokens and pass of column blocks. The
// products are a function of their own: inlined into the loop nest with the requantization,
// GCC 12 spilled the loop state around them (measured on Zen 3, 256 tokens x 256 columns of
// Q4_0 on one thread: the kernel 1.2x faster so).
// Each token's dY row is prefetched 16 tokens ahead: a chunk's 32 rows of 64 int16 are one
// 4 KiB page of Int8GradRows (cpu_engine.cpp), where the hardware prefetchers stop, and the
// products between two chunks leave them time to arrive. (Past the chunk the prefetches
// reach the next chunk's or the next row block's rows; past the array's end, computed as an
// integer address, they are harmless.)
// Measured on Zen 5 (qwen2.5-1.5b gate Q4_0, 256 tokens, one thread, CPU samples): the
// requantization 4.4% -> 3.3% of the run, the loads of y16 had the most samples before.
template <Int8Kind K>
inline void requantize_grad_chunk(const int16_t* Y, int64_t ldg, const float* ey, int64_t lds, int64_t ct,
                                  const GradPanel& p, int64_t s0, int64_t ns, GradPass& pass) {
  for (int64_t i = 0; i < ct; ++i) {
    const uintptr_t ahead = reinterpret_cast<uintptr_t>(Y + i * ldg) + 16 * ldg * sizeof(int16_t);
    _mm_prefetch(reinterpret_cast<const char*>(ahead), _MM_HINT_T0);
    requantize_grad_token<kUnsignedGradActivations<K>>(Y + i * ldg, ey[i * lds], pass.rho, p, s0, ns, pass.qv[i],
                                                       pass.e[i]);
  }
}
template <Int8Kind K, GradStart S, int kRun, int kParts>
__attribute__((noinline)) void grad_chunk_products(const GradPass& pass, int64_t ct, const GradPanel& p, int64_t b0,
                                                   int64_t nb, int64_t n, const float* A, int64_t lda, float* D,
                                                   int64_t ldd) {
  int64_t i = 0;
#if NL_INT8_VNNI_EVEX
  for (; i + 8 <= ct; i += 8)
    grad_pass_products512<8, S, kParts>(pass, i, p, b0, nb, n, A + i * lda, lda, D + i * ldd, ldd);
  for (; i + 4 <= ct; i += 4)
    grad_pass_products512<4, S, kParts>(pass, i, p, b0, nb, n, A + i * lda, lda, D + i * ldd, ldd);
  for (; i < ct; ++i) grad_pass_products512<1, S, kParts>(pass, i, p, b0, nb, n, A + i * lda, lda, D + i * ldd, ldd);
  return;
#endif
  for (; i + 4 <= ct; i += 4)
    grad_pass_products<4, K, S, kRun, kParts>(pass, i, p, b0, nb, n, A + i * lda, lda, D + i * ldd, ldd);
  for (; i < ct; ++i)
    grad_pass_products<1, K, S, kRun, kParts>(pass, i, p, b0, nb, n, A + i * lda, lda, D + i * ldd, ldd);
}

// One row block, in two phases per chunk of tokens and pass of column blocks: first every
// token's dY is requantized, then the products run over the requantized chunk. Measured on
// Zen 5 (64 tokens x 256 columns, one thread): the kernel 10-15% faster than alternating the
// two phases per 4 tokens (as before); the engine's input gradient 3-10% (Q4_0 and Q8_0,
// with and without VNNI). On Zen 3 (256 tokens x 256 columns, Q4_0) the requantization
// takes an eighth of the kernel's time. The passes are the outer loop, so each pass's ratios
// and column sums are prepared once for all the chunks (they depend on the panel alone).
template <Int8Kind K, int kRun = 8, int kParts = 1>
void input_grad_kind(const int16_t* Y, int64_t ldg, const float* ey, int64_t lds, int64_t nt, const GradPanel& p,
                     int64_t n, const GradOut& out) {
  constexpr int64_t kBlocksPerPass = kGradBlocksPerPass / kParts;
  GradPass pass;
  for (int64_t b0 = 0; b0 < p.blocks; b0 += kBlocksPerPass) {
    const int64_t nb = std::min(kBlocksPerPass, p.blocks - b0);
    prepare_pass<kUnsignedGradActivations<K>, kParts>(p, b0, nb, pass);
    for (int64_t t0 = 0; t0 < nt; t0 += kGradChunkTokens) {
      const int64_t ct = std::min(kGradChunkTokens, nt - t0);
      requantize_grad_chunk<K>(Y + t0 * ldg, ldg, ey + t0 * lds, lds, ct, p, b0 * kParts, nb * kParts, pass);
      const GradOut o = out.from_token(t0);
      if (!o.acc)
        grad_chunk_products<K, GradStart::Zero, kRun, kParts>(pass, ct, p, b0, nb, n, nullptr, 0, o.D, o.ldd);
      else if (o.acc == o.D && o.lda == o.ldd)
        grad_chunk_products<K, GradStart::InPlace, kRun, kParts>(pass, ct, p, b0, nb, n, nullptr, 0, o.D, o.ldd);
      else
        grad_chunk_products<K, GradStart::Apart, kRun, kParts>(pass, ct, p, b0, nb, n, o.acc, o.lda, o.D, o.ldd);
    }
  }
}

void input_grad_avx2(const int16_t* Y, int64_t ldg, const float* ey, int64_t lds, int64_t nt, const GradPanel& p,
                     int64_t n, const GradOut& out) {
  if (p.kind == Int8Kind::Signed6) {  // two scale parts per block; without VNNI as Q4_0's, 2 chunks per int16 run
    if constexpr (NL_INT8_VNNI)
      input_grad_kind<Int8Kind::Signed, 8, 2>(Y, ldg, ey, lds, nt, p, n, out);
    else
      input_grad_kind<Int8Kind::Nibble, 2, 2>(Y, ldg, ey, lds, nt, p, n, out);
  } else if (p.kind == Int8Kind::Nibble)
    input_grad_kind<Int8Kind::Nibble>(Y, ldg, ey, lds, nt, p, n, out);
  else if (!NL_INT8_VNNI && p.kind == Int8Kind::Signed5)  // small signed values, as Q4_0's (kRun)
    input_grad_kind<Int8Kind::Nibble, 4>(Y, ldg, ey, lds, nt, p, n, out);
  else
    input_grad_kind<Int8Kind::Signed>(Y, ldg, ey, lds, nt, p, n, out);
}

// The set, named isa.
// add_forward_offsets (kernels_int8.h): each row group's 8 rows in one vector, kNP groups x
// kNT tokens (up to eight chains, all in registers) at once, so each broadcast of z feeds kNP
// fmas.
template <int kNP, int kNT>
inline void add_forward_offsets_tokens(const float* z, int64_t ldz, const float* const off[kNP], int64_t blocks,
                                       int64_t nr_last, float* Y, int64_t ldy) {
  __m256 acc[kNT][kNP];
  for (int k = 0; k < kNT; ++k)
    for (int g = 0; g < kNP; ++g) acc[k][g] = _mm256_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    __m256 c[kNP];
    for (int g = 0; g < kNP; ++g) c[g] = _mm256_loadu_ps(off[g] + b * 8);
    for (int k = 0; k < kNT; ++k) {
      const __m256 zz = _mm256_broadcast_ss(z + k * ldz + b);
      for (int g = 0; g < kNP; ++g) acc[k][g] = _mm256_fmadd_ps(c[g], zz, acc[k][g]);
    }
  }
  for (int k = 0; k < kNT; ++k)
    for (int g = 0; g < kNP; ++g) {
      float* y = Y + k * ldy + 8 * g;
      if (g < kNP - 1 || nr_last == 8) {
        _mm256_storeu_ps(y, _mm256_add_ps(_mm256_loadu_ps(y), acc[k][g]));
      } else {
        alignas(32) float tmp[8];
        _mm256_store_ps(tmp, acc[k][g]);
        for (int64_t i = 0; i < nr_last; ++i) y[i] += tmp[i];
      }
    }
}

#if NL_INT8_VNNI_EVEX
// The same for four row groups in the AVX-512 set: two groups' 16 rows per register (half
// the fmas), four tokens at once.
template <int kNT>
inline void add_forward_offsets_tokens512(const float* z, int64_t ldz, const float* const off[4], int64_t blocks,
                                          int64_t nr_last, float* Y, int64_t ldy) {
  __m512 acc[kNT][2];
  for (int k = 0; k < kNT; ++k) acc[k][0] = acc[k][1] = _mm512_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    const __m512 c0 = _mm512_castsi512_ps(join_halves(off[0] + b * 8, off[1] + b * 8)),
                 c1 = _mm512_castsi512_ps(join_halves(off[2] + b * 8, off[3] + b * 8));
    for (int k = 0; k < kNT; ++k) {
      const __m512 zz = _mm512_set1_ps(z[k * ldz + b]);
      acc[k][0] = _mm512_fmadd_ps(c0, zz, acc[k][0]);
      acc[k][1] = _mm512_fmadd_ps(c1, zz, acc[k][1]);
    }
  }
  for (int k = 0; k < kNT; ++k) {
    float* y = Y + k * ldy;
    _mm512_storeu_ps(y, _mm512_add_ps(_mm512_loadu_ps(y), acc[k][0]));
    if (nr_last == 8) {
      _mm512_storeu_ps(y + 16, _mm512_add_ps(_mm512_loadu_ps(y + 16), acc[k][1]));
    } else {  // rows 16..23, then the last group's nr_last
      alignas(64) float tmp[16];
      _mm512_store_ps(tmp, acc[k][1]);
      for (int64_t i = 0; i < 8 + nr_last; ++i) y[16 + i] += tmp[i];
    }
  }
}
#endif

template <int kNP>
void add_forward_offsets_groups(const float* z, int64_t ldz, int64_t nt, const ForwardPanel* const* p, int64_t nr_last,
                                float* Y, int64_t ldy) {
  const float* off[kNP];
  for (int g = 0; g < kNP; ++g) off[g] = p[g]->offset.data();
  const int64_t blocks = p[0]->blocks;
  int64_t t = 0;
#if NL_INT8_VNNI_EVEX
  if constexpr (kNP == 4)
    for (; t + 4 <= nt; t += 4)
      add_forward_offsets_tokens512<4>(z + t * ldz, ldz, off, blocks, nr_last, Y + t * ldy, ldy);
#endif
  for (; t + 2 <= nt; t += 2) add_forward_offsets_tokens<kNP, 2>(z + t * ldz, ldz, off, blocks, nr_last, Y + t * ldy, ldy);
  if (t < nt) add_forward_offsets_tokens<kNP, 1>(z + t * ldz, ldz, off, blocks, nr_last, Y + t * ldy, ldy);
}

void add_forward_offsets_avx2(const float* z, int64_t ldz, int64_t nt, const ForwardPanel* const* p, int64_t np,
                              int64_t nr_last, float* Y, int64_t ldy) {
  switch (np) {
    case 4: return add_forward_offsets_groups<4>(z, ldz, nt, p, nr_last, Y, ldy);
    case 3: return add_forward_offsets_groups<3>(z, ldz, nt, p, nr_last, Y, ldy);
    case 2: return add_forward_offsets_groups<2>(z, ldz, nt, p, nr_last, Y, ldy);
    default: return add_forward_offsets_groups<1>(z, ldz, nt, p, nr_last, Y, ldy);
  }
}

// grad_offset_sums (kernels_int8.h): 8 blocks per 256-bit vector (16 per 512-bit one in the
// AVX-512 set); up to four tokens times two vectors of blocks go together, eight independent
// chains (fewer would wait on the fma latency). Vec: the register width's operations.
struct Vec256 {
  using T = __m256;
  static constexpr int kLanes = 8;
  static T load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, T v) { _mm256_storeu_ps(p, v); }
  static T splat(const float* p) { return _mm256_broadcast_ss(p); }
  static T fmadd(T a, T b, T c) { return _mm256_fmadd_ps(a, b, c); }
};
#if NL_INT8_VNNI_EVEX
struct Vec512 {
  using T = __m512;
  static constexpr int kLanes = 16;
  static T load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, T v) { _mm512_storeu_ps(p, v); }
  static T splat(const float* p) { return _mm512_set1_ps(*p); }
  static T fmadd(T a, T b, T c) { return _mm512_fmadd_ps(a, b, c); }
};
using VecWide = Vec512;
#else
using VecWide = Vec256;
#endif

template <class V, int kTokens, int kVecs>
inline void grad_offset_chains(const float* dY, int64_t ldy, int64_t nrows, const float* C, int64_t ldc, float* G,
                               int64_t ldg) {
  typename V::T acc[kTokens][kVecs];
  for (int k = 0; k < kTokens; ++k)
    for (int v = 0; v < kVecs; ++v) acc[k][v] = V::load(G + k * ldg + V::kLanes * v);
  for (int64_t r = 0; r < nrows; ++r) {
    typename V::T c[kVecs];
    for (int v = 0; v < kVecs; ++v) c[v] = V::load(C + r * ldc + V::kLanes * v);
    for (int k = 0; k < kTokens; ++k) {
      const typename V::T y = V::splat(dY + k * ldy + r);
      for (int v = 0; v < kVecs; ++v) acc[k][v] = V::fmadd(c[v], y, acc[k][v]);
    }
  }
  for (int k = 0; k < kTokens; ++k)
    for (int v = 0; v < kVecs; ++v) V::store(G + k * ldg + V::kLanes * v, acc[k][v]);
}

template <int kTokens>
inline void grad_offset_token_group(const float* dY, int64_t ldy, int64_t nrows, const float* C, int64_t ldc,
                                    int64_t nb, float* G, int64_t ldg) {
  constexpr int64_t kWide = 2 * VecWide::kLanes;
  int64_t b = 0;
  for (; b + kWide <= nb; b += kWide) grad_offset_chains<VecWide, kTokens, 2>(dY, ldy, nrows, C + b, ldc, G + b, ldg);
  for (; b + VecWide::kLanes <= nb; b += VecWide::kLanes)
    grad_offset_chains<VecWide, kTokens, 1>(dY, ldy, nrows, C + b, ldc, G + b, ldg);
  for (; b < nb; b += 8) grad_offset_chains<Vec256, kTokens, 1>(dY, ldy, nrows, C + b, ldc, G + b, ldg);
}

void grad_offset_sums_avx2(const float* dY, int64_t ldy, int64_t nt, int64_t nrows, const float* C, int64_t ldc,
                           int64_t nb, float* G, int64_t ldg) {
  int64_t t = 0;
  for (; t + 4 <= nt; t += 4) grad_offset_token_group<4>(dY + t * ldy, ldy, nrows, C, ldc, nb, G + t * ldg, ldg);
  for (; t < nt; ++t) grad_offset_token_group<1>(dY + t * ldy, ldy, nrows, C, ldc, nb, G + t * ldg, ldg);
}

void spread_grad_offsets_avx2(const float* G, int64_t ldg, int64_t nt, int64_t nb, float* dX, int64_t ldx) {
  for (int64_t t = 0; t < nt; ++t)
    for (int64_t b = 0; b < nb; ++b) {
      const __m256 g = _mm256_set1_ps(G[t * ldg + b]);
      float* x = dX + t * ldx + b * kQ8Block;
      for (int k = 0; k < 4; ++k) _mm256_storeu_ps(x + 8 * k, _mm256_add_ps(_mm256_loadu_ps(x + 8 * k), g));
    }
}

inline Int8Kernels avx2_int8_kernels(const char* isa) {
  return {isa,
          quantize_row_avx2,
          pack_forward_tiles_avx2,
          pack_grad_tiles_avx2,
          forward_avx2,
          forward_pair_avx2,
          grad_rows_avx2,
          input_grad_avx2,
          nullptr,
          add_forward_offsets_avx2,
          grad_offset_sums_avx2,
          spread_grad_offsets_avx2};
}

}  // namespace
}  // namespace nl::engine
