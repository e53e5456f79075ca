// The int8 precision mode of the cpu engine: activations quantized to int8 per block of 32
// values (like llama.cpp's q8_0 activations), integer dot products with int8 weights, f32
// accumulation across blocks.
//
// Weights: Q4_0, Q8_0, Q4_K, Q5_K and Q6_K matrices use their own quants and scales exactly
// (nothing is requantized). A Q4_K 32-value sub-block is w = s q - o (q in 0..15, s = d sc and o =
// dmin mn exact in f32), which is Q4_0's form s (q - 8) plus a per-(row, block) offset
// c = 8 s - o (one rounding; both products are exact). So Q4_K panels hold q as Q4_0's do,
// with scales s. Q5_K's (q in 0..31) is s (q - 16) plus c = 16 s - o: its panels hold the
// values q - 16 as signed bytes (Signed5 panels: 5-bit values would overflow the nibble
// kernels' int16 sums of 8 chunks). The offsets enter as f32 chains of fused multiply-adds
// from 0 after the integer products (in increasing order of the reduced index):
//   forward     Y[t,r]  += sum over b of c[r,b] z[t,b],  z[t,b] = dx[t,b] * float(sum_j qx[t,b,j])
//               (ForwardPanel::offset, add_forward_offsets)
//   input grad  dX[t,c] += G[t,b] for the columns c of block b, G[t,b] = sum over rows r of
//               c[r,b] dY[t,r]   (grad_offset_sums, after the whole integer product)
// Q6_K's 16-value sub-blocks are w = d sc (q - 32) (q in 0..63, sc a signed byte, d per
// 256 values): its panels hold the values q - 32 (Signed6) with the integer scales sc of
// each half of a 32-column block (ForwardPanel::sub_scales) and d as the block's scale:
//   forward     isum    = sc[r,2b] * sum_{j<16} qx[t,b,j] qw[r,b,j]
//                       + sc[r,2b+1] * sum_{j>=16} qx[t,b,j] qw[r,b,j]   (exact, int32)
//               then the chain below with dw[r,b] = d.
//   input grad  the row scales of a column block differ between its two halves, so dY is
//               requantized per half (GradPanel::parts = 2): dw[r,h] = d sc[r,h] (exact in
//               f32), m, rho, rho16 and e per 16 columns, as below per 32.
// Q5_0 weights are Q8_0 tiles of the quants q - 16 (tile_layout.h), whose panels are Signed5
// ones (legacy_tile_kind): the values as stored, exactly.
// Every other type (F16, BF16, F32, Q4_1, Q5_1) is quantized once, at the matrix's
// first int8 reservation or product, to a Q8_0 copy (quantize_block_q8_0: per row and 32
// columns, d the smallest half >= max|w|/127 and q = round(w / d); columns past the last
// whole block are zeros), whose products are then Q8_0's: an extra error of at most half a
// step, 1/254 of each 32-value block's largest weight. (Until 2026-12-07 each task dequantized
// and requantized its panels: on Zen 3, plain AVX2, 1.39x the copy's time at 64 tokens per
// product and the same at 256; decode steps took the f32 kernels at half the speed.)
//
// The definition, for one token t and one matrix W (rows r, columns c, blocks b of 32):
//   forward     Y[t,r]  = sum over b, in increasing order, as a chain of f32 fused
//                         multiply-adds:  acc = fma(float(isum), dw[r,b] * dx[t,b], acc)
//               isum    = sum_j qx[t,b,j] * qw[r,b,j]   (exact, in integers)
//   input grad  dX = dY·W reduces over rows, along which W's scale dw[r,b] varies: it is
//               folded into dY first, under a scale bound computed from the two factors
//               separately (so dY is scaled once per row block, not once per column block).
//               For token t and row block R (64 rows), once per product (grad_rows):
//                 ey = max_{r in R} |dY[t,r]| / 127, y[r] = dY[t,r] * (1/ey)   (0 if ey = 0)
//                 y16[r] = round(256 y[r])  (int16, |y16| <= 32512; grad_y16)
//               for column block b and R (computed once, when the panel is packed):
//                 m = max_{r in R} |dw[r,b]|, rho[r] = dw[r,b] / m   (0 if m = 0)
//                 rho16[r] = round(16384 rho[r])   (int16, |rho16| <= 16384)
//               then qv[r] = round(y[r] * rho[r]) in fixed point (requantize_grad_value:
//               two rounding multiplies, AVX2's vpmulhrsw, NEON's vqrdmulh), e = ey * m and
//               dX[t,c] = sum over R, in increasing order: acc = fma(float(isum), e, acc)
//               isum    = sum_{r in R} qv[r] * qw[r,c]
//               The weights enter exactly as in the forward product (dw and qw as stored).
//               The bound e >= max|dY dw| / 127 costs precision only when |dY| and |dw|
//               peak on different rows of a block. qv is round(y rho) but within about
//               1/100 of a tie (where the fixed-point steps may round the other way).
//               Per 64x32 weight tile and token the requantization is two 16-bit
//               multiplies per row.
//               Why 64 rows, not 32 (the weights' block): each row block ends in one f32
//               multiply-add per output and token (a load, a conversion and a store for
//               every 8 columns), work the forward product has no counterpart for. With
//               32-row blocks the input gradient ran 1.00-1.27x the forward's time on Zen 5
//               (int8, Q4_0/Q8_0, 2 threads); with 64 it runs 1.09x faster, 0.90-1.12x the
//               forward's (docs/PERFORMANCE.md). The price: e is bounded over 64 rows.
// The quantizer of a block of 32 floats v: amax = max|v|, d = amax / 127, q = round half
// to even (v * (1/d)) (q = 0 when d = 0). A row's last partial block is padded with zeros.
//
// Every kernel set (scalar, AVX2, NEON) computes exactly these integers and this f32 chain,
// so they agree bit for bit with each other and with precision_reference.h.
//
// Panels: the kernels read weights from small per-thread panels packed for a whole block of
// tokens (the "4-byte chunk" layout, as llama.cpp's repacked q4_0 x q8_0 kernels and the
// sdot lane form want it), never from a full int8 copy of W.
//   ForwardPanel: 8 rows x all column blocks; per block 8 chunks (4 consecutive columns),
//                 each chunk 8 rows x 4 bytes (32 bytes).
//   GradPanel:    64 rows (one row block) x the task's column blocks, transposed: per block
//                 4 groups of 8 columns, each 16 chunks (4 consecutive rows) of 8 columns x
//                 4 bytes; per block the scale bound m, the 64 ratios rho and rho16.
// Q4_0 weights in forward panels stay unsigned nibbles u in [0, 15] (value u - 8): AVX2's
// vpmaddubsw multiplies unsigned by signed bytes, and sum (u - 8) q = sum u q - 8 sum q, so
// the offset costs one subtraction per block (sum q comes with the quantized activations).
// Input-gradient panels hold the values u - 8 as signed bytes: there the activations are
// requantized per block, and AVX2 takes them unsigned (q + 128, which |u - 8| <= 8 keeps
// within vpmaddubsw's int16 pairs) against a per-column sum of the weights, computed once
// per panel, instead of summing every token's quants.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "../quant/blocks.h"
#include "nightlora/util/half.h"
#include "tile_layout.h"

namespace nl::engine {

inline constexpr int64_t kQ8Block = 32;  // values per int8 activation block
inline constexpr int64_t kGradRowBlock = 64;  // rows per input-gradient reduction block
inline constexpr int64_t kGradChunks = kGradRowBlock / 4;  // 4-row chunks per column group
inline constexpr int64_t kGradPanelBlockBytes = 4 * kGradChunks * 32;  // per column block

// How a panel's weight bytes read: unsigned Q4_0 nibbles (value u - 8), signed int8, or
// signed int8 within [-16, 15] (Signed5: Q5_K's q - 16) or [-32, 31] (Signed6: Q6_K's
// q - 32, with per-16 integer scales). Signed5 panels are signed ones to every set; without
// VNNI the AVX2 kernels take them as they take Q4_0's nibbles, biased by 16, summing 4 chunks
// in int16 where nibbles sum 8. Signed6 panels need their own forward kernels (the scales).
enum class Int8Kind : uint8_t { Nibble, Signed, Signed5, Signed6 };
inline bool is_signed(Int8Kind k) { return k != Int8Kind::Nibble; }
// The kind of the panels of a Q4_0 or Q8_0 tiled matrix: Q4_0's nibbles, Q8_0's bytes, or
// Signed5 for the Q8_0 tiles of Q5_0 weights (every quant in [-16, 15], tile_layout.h).
inline Int8Kind legacy_tile_kind(const TiledMatrix& m) {
  return m.type == QType::Q4_0 ? Int8Kind::Nibble : m.five_bit_quants ? Int8Kind::Signed5 : Int8Kind::Signed;
}

struct ForwardPanel {
  Int8Kind kind = Int8Kind::Signed;
  int64_t blocks = 0;
  std::vector<uint8_t> q;  // blocks x 8 chunks x 8 rows x 4 bytes (padded rows: 0)
  std::vector<float> d;    // blocks x 8 rows (padded rows: 0)
  // blocks x 8 rows: 128 x the sum of each row's quants in the block (signed panels only;
  // forward_weight_sums defines it). Every set's packers fill it; the AVX-VNNI forward
  // subtracts it (its activations are unsigned, q + 128: kernels_int8_avx2_body.h).
  // For Signed6 panels the sums are 128 x (sc0 x the first 16 quants' sum + sc1 x the last 16's).
  std::vector<int32_t> wsum;
  // Signed6 panels: blocks x 2 halves x 8 rows, each half's integer scale sc as two int16
  // (scale_pair: the form vpmaddwd multiplies by; sc = value >> 16). Padded rows: 0.
  std::vector<int32_t> sub_scales;
  // Q4_K/Q5_K panels (has_offsets): blocks x 8 rows, the offsets c (padded rows: 0).
  bool has_offsets = false;
  std::vector<float> offset;
  void resize(int64_t nb) {
    blocks = nb;
    if (q.size() < static_cast<size_t>(nb * 256)) q.resize(static_cast<size_t>(nb * 256));
    if (d.size() < static_cast<size_t>(nb * 8)) d.resize(static_cast<size_t>(nb * 8));
    if (wsum.size() < static_cast<size_t>(nb * 8)) wsum.resize(static_cast<size_t>(nb * 8));
    if (sub_scales.size() < static_cast<size_t>(nb * 16)) sub_scales.resize(static_cast<size_t>(nb * 16));
  }
  int32_t sub_scale(int64_t b, int h, int64_t row) const { return sub_scales[static_cast<size_t>((b * 2 + h) * 8 + row)] >> 16; }
  void resize_offsets(int64_t nb) {
    if (offset.size() < static_cast<size_t>(nb * 8)) offset.resize(static_cast<size_t>(nb * 8));
  }
  // Readies a Q4_K/Q5_K panel of nb blocks (kind, offsets, sizes); every set's packer starts so.
  void start_kquant(QType type, int64_t nb);
  // The same for a Q6_K panel (Signed6, no offsets).
  void start_q6k(int64_t nb) {
    kind = Int8Kind::Signed6;
    has_offsets = false;
    resize(nb);
  }
};

// Whether the int8 products pack a tiled matrix of this type from its stored quants
// (pack_forward_tiles, pack_grad_tiles): Q4_0, Q8_0 (and Q5_0's Q8_0 tiles), Q4_K, Q5_K and
// Q6_K. Every other type's products pack its Q8_0 copy (quantize_block_q8_0).
inline bool int8_uses_stored_quants(QType t) {
  return t == QType::Q4_0 || t == QType::Q8_0 || t == QType::Q4_K || t == QType::Q5_K || t == QType::Q6_K;
}
// One block of the Q8_0 copy (the definition above) from n <= 32 values of a weight row (the
// rest taken as zeros). A non-finite weight makes d non-finite (max|w| infinite) or gives
// the quant -128 (NaN), as the activation quantizer does.
void quantize_block_q8_0(const float* v, int64_t n, quant::BlockQ8_0* out);
// An int16 scale in both halves of an int32 (ForwardPanel::sub_scales).
inline int32_t scale_pair(int sc) {
  return static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint16_t>(sc)) * 0x10001u);
}
// The types whose stored quants enter with offsets (the K-quants with mins, above), and the
// kind of their panels: Q4_K's nibbles as Q4_0's, Q5_K's values q - 16 as Signed5.
inline bool int8_has_offsets(QType t) { return t == QType::Q4_K || t == QType::Q5_K; }
inline Int8Kind kquant_kind(QType t) { return t == QType::Q5_K ? Int8Kind::Signed5 : Int8Kind::Nibble; }
inline void ForwardPanel::start_kquant(QType type, int64_t nb) {
  kind = kquant_kind(type);
  has_offsets = true;
  resize(nb);
  resize_offsets(nb);
}

// The scales s = d sc and offsets c = mid s - dmin mn of the 8 sub-blocks of a Q4_K (mid 8)
// or Q5_K (mid 16) block (the definition above; every set's packers use them), and the scale
// of sub-block j alone.
struct KQuantBlockScales {
  float s[8], c[8];
};
inline float kquant_mid(QType t) { return t == QType::Q5_K ? 16.0f : 8.0f; }
KQuantBlockScales kquant_block_scales(const uint8_t* block, float mid);
inline float kquant_scale(const uint8_t* block, int j) {
  uint16_t d;
  std::memcpy(&d, block, sizeof d);
  uint8_t sc, mn;
  quant::unpack_scale_min_k4(j, block + 4, &sc, &mn);
  return fp16_to_f32(d) * static_cast<float>(sc);
}
inline constexpr size_t kQ4KQuantsOffset = 16;  // d, dmin, 12 bytes of scales and mins
inline constexpr size_t kQ5KHighBitsOffset = 16;  // Q5_K: d, dmin, scales, then qh
inline constexpr size_t kQ5KQuantsOffset = 48;    // and the low nibbles after qh's 32 bytes
// Value k (< 32) of sub-block j of a Q5_K block: its nibble, and bit 4 from bit j of qh[k].
inline uint8_t q5k_quant(const uint8_t* block, int j, int k) {
  const int low = (block[kQ5KQuantsOffset + 32 * (j / 2) + k] >> (4 * (j % 2))) & 0x0F;
  return static_cast<uint8_t>(low | (((block[kQ5KHighBitsOffset + k] >> j) & 1) << 4));
}
// Q6_K blocks (BlockQ6_K): 128 bytes of low nibbles, 64 of high bit pairs, 16 signed scales,
// then d. Value k (< 256): q6k_quant (in 0..63), sub-block k / 16's scale q6k_scale.
inline constexpr size_t kQ6KHighBitsOffset = 128, kQ6KScalesOffset = 192, kQ6KScaleOffset = 208;
inline uint8_t q6k_quant(const uint8_t* block, int k) {
  const int n = k / 128, quarter = (k % 128) / 32, l = k % 32;
  const uint8_t low = block[64 * n + 32 * (quarter & 1) + l];
  const int high = (block[kQ6KHighBitsOffset + 32 * n + l] >> (2 * quarter)) & 3;
  return static_cast<uint8_t>((quarter < 2 ? low & 0x0F : low >> 4) | (high << 4));
}
inline int q6k_scale(const uint8_t* block, int s) { return static_cast<int8_t>(block[kQ6KScalesOffset + s]); }
inline float q6k_d(const uint8_t* block) {
  uint16_t d;
  std::memcpy(&d, block + kQ6KScaleOffset, sizeof d);
  return fp16_to_f32(d);
}
// A Q6_K forward panel's scales (d) and sub_scales of super-block sb (its 8 column blocks)
// for the rows of row group g (padded rows: 0). Every set's packer uses it.
void q6k_forward_panel_scales(const TiledMatrix& m, int64_t g, int64_t sb, ForwardPanel& p);

// A Q4_K/Q5_K forward panel's scales and offsets of super-block sb (its 8 column blocks) for
// the rows of row group g (padded rows: 0). Every set's packer uses it.
void kquant_forward_panel_scales(const TiledMatrix& m, int64_t g, int64_t sb, ForwardPanel& p);

struct GradPanel {
  // Nibble: Q4_0's and Q4_K's values u - 8 as signed bytes; Signed5: Q5_K's q - 16;
  // Signed6: Q6_K's q - 32.
  Int8Kind kind = Int8Kind::Signed;
  int64_t blocks = 0;
  // Scale parts per column block: 1, or 2 for Signed6 (columns 0-15, i.e. column groups 0
  // and 1, then 16-31), each with its own rho, rho16 and m. Part s of block b is scale block
  // b * parts + s.
  int64_t parts = 1;
  std::vector<uint8_t> q;    // blocks x 4 column groups x 16 chunks x 8 columns x 4 bytes
  std::vector<float> rho;    // scale blocks x 64 rows: dw[r,b] / m[b] (padded rows: 0)
  std::vector<int16_t> rho16;  // scale blocks x 64 rows: round(16384 rho)
  std::vector<float> m;      // scale blocks: max |dw[r,b]| over the block's rows
  void resize(int64_t nb, int64_t np = 1) {
    blocks = nb;
    parts = np;
    const int64_t ns = nb * np;
    if (q.size() < static_cast<size_t>(nb * kGradPanelBlockBytes)) q.resize(static_cast<size_t>(nb * kGradPanelBlockBytes));
    if (rho.size() < static_cast<size_t>(ns * kGradRowBlock)) rho.resize(static_cast<size_t>(ns * kGradRowBlock));
    if (rho16.size() < static_cast<size_t>(ns * kGradRowBlock)) rho16.resize(static_cast<size_t>(ns * kGradRowBlock));
    if (m.size() < static_cast<size_t>(ns)) m.resize(static_cast<size_t>(ns));
  }
  int64_t scale_blocks() const { return blocks * parts; }
};
// The scale parts of a type's input-gradient panels (GradPanel::parts).
inline int64_t int8_grad_parts(QType t) { return t == QType::Q6_K ? 2 : 1; }

// ForwardPanel::wsum of a signed panel from its quants (and a Signed6 panel's sub_scales; the
// definition: the packers may get the sums elsewhere, e.g. from the quantizer, but give the
// same numbers).
void forward_weight_sums(ForwardPanel& p);

// The packers store each row's weight scale dw[r,b] in rho (per scale block); this turns them
// into the scale bound m[b], the ratios rho = dw / m and rho16 (one definition for every
// ISA's packers).
void normalize_grad_scales(GradPanel& p);

// The scale of dY for one token and row block (nrows <= 64 values of g): returns
// ey = max|g| / 127 and stores inv = 1/ey (0 if ey = 0); y = g * inv.
float grad_block_scale(const float* g, int64_t nrows, float* inv);

// Where one input-gradient call's sums go: D[t*ldd + c] = acc[t*lda + c] + the row block's
// contribution, or the contribution alone when acc is null (fma(x, e, +0), as onto a zeroed
// block). acc may be D (accumulating in place) or another block: the engine's first row
// block needs no zeroed block, and its last writes into dX itself, so no copy follows.
struct GradOut {
  const float* acc;
  int64_t lda;
  float* D;
  int64_t ldd;
  // The same, from token t on.
  GradOut from_token(int64_t t) const { return {acc ? acc + t * lda : nullptr, lda, D + t * ldd, ldd}; }
};

struct Int8Kernels {
  const char* isa;
  // Quantizes x[0, n) per 32 values (the tail padded with zeros): ceil(n/32) blocks of 32
  // int8 in q, their scales in d and the sum of each block's quants in sum.
  void (*quantize_row)(const float* x, int64_t n, int8_t* q, float* d, int32_t* sum);
  // Packs row group g (8 rows) of a tiled matrix of stored quants (int8_uses_stored_quants), every column block.
  void (*pack_forward_tiles)(const TiledMatrix& m, int64_t g, ForwardPanel& p);
  // Packs rows [64*rb, 64*rb + 64) x column blocks [b0, b1) of such a tiled
  // matrix.
  void (*pack_grad_tiles)(const TiledMatrix& m, int64_t rb, int64_t b0, int64_t b1, GradPanel& p);
  // Y[t*ldy + i] for t < nt, i < nr: tokens quantized by quantize_row, row t of q at
  // q + t * ldq (ldq = 32 * blocks), of d and sum at t * blocks.
  void (*forward)(const int8_t* q, const float* d, const int32_t* sum, int64_t ldq, int64_t nt,
                  const ForwardPanel& p, int64_t nr, float* Y, int64_t ldy);
  // forward for two row groups at once, the same outputs as forward(p0, 8 rows, Y) then
  // forward(p1, nr1 rows, Y + 8): the AVX2 set broadcasts each activation chunk once for
  // both panels; the others make the two calls (forward_pair_by_calls).
  void (*forward_pair)(const int8_t* q, const float* d, const int32_t* sum, int64_t ldq, int64_t nt,
                       const ForwardPanel& p0, const ForwardPanel& p1, int64_t nr1, float* Y, int64_t ldy);
  // One token's row g[0, n) of dY, per row block R of 64 rows: its scale ey[R] (as
  // grad_block_scale) and its 64 values y16 (grad_y16; zeros past n) at y + R * ldb.
  void (*grad_rows)(const float* g, int64_t n, float* ey, int16_t* y, int64_t ldb);
  // One row block's contribution to dX for t < nt, c < n, into out (GradOut): Y holds the
  // block's 64 values y16 for token t at Y + t * ldg (grad_rows), their scale at ey[t * lds].
  void (*input_grad)(const int16_t* Y, int64_t ldg, const float* ey, int64_t lds, int64_t nt, const GradPanel& p,
                     int64_t n, const GradOut& out);
  // forward for four row groups at once (32 rows, the last nr3 of p[3] valid), the same
  // outputs as forward_pair(p[0], p[1], 8, Y) then forward_pair(p[2], p[3], nr3, Y + 16);
  // null where a set has none (the engine then takes two row groups per task). The
  // AVX-512 VNNI set's: each activation broadcast feeds two vpdpbusd (32 rows), where its
  // forward pair is bound by the broadcasts (kernels_int8_avx512_vnni.cpp).
  void (*forward_quad)(const int8_t* q, const float* d, const int32_t* sum, int64_t ldq, int64_t nt,
                       const ForwardPanel* const p[4], int64_t nr3, float* Y, int64_t ldy) = nullptr;
  // Q4_K/Q5_K panels' offsets (has_offsets) added to forward's outputs: np (1 to 4) consecutive
  // row groups, p[i]'s rows at Y + 8 i (the last one's first nr_last rows), tokens t < nt at
  // Y + t * ldy; z[t*ldz + b] = dx[t,b] * float(sum[t,b]) (forward_offset_factors).
  void (*add_forward_offsets)(const float* z, int64_t ldz, int64_t nt, const ForwardPanel* const* p, int64_t np,
                              int64_t nr_last, float* Y, int64_t ldy) = nullptr;
  // Q4_K/Q5_K input-gradient offsets, rows [0, nrows) of a chain that goes on over the rows:
  // G[t*ldg + b] = fma(C[r*ldc + b], dY[t*ldy + r], G[t*ldg + b]) for r = 0, 1, ..., for
  // t < nt and b < nb (a multiple of 8).
  void (*grad_offset_sums)(const float* dY, int64_t ldy, int64_t nt, int64_t nrows, const float* C, int64_t ldc,
                           int64_t nb, float* G, int64_t ldg) = nullptr;
  // Then dX[t*ldx + 32 b + k] += G[t*ldg + b] for t < nt, b < nb, k < 32.
  void (*spread_grad_offsets)(const float* G, int64_t ldg, int64_t nt, int64_t nb, float* dX, int64_t ldx) = nullptr;
};

// z = d * float(sum), n values (the factors the offsets multiply; one rounding each).
void forward_offset_factors(const float* d, const int32_t* sum, int64_t n, float* z);
// The scalar definitions of add_forward_offsets and grad_offset_sums.
void add_forward_offsets_scalar(const float* z, int64_t ldz, int64_t nt, const ForwardPanel* const* p, int64_t np,
                                int64_t nr_last, float* Y, int64_t ldy);
void grad_offset_sums_scalar(const float* dY, int64_t ldy, int64_t nt, int64_t nrows, const float* C, int64_t ldc,
                             int64_t nb, float* G, int64_t ldg);
void spread_grad_offsets_scalar(const float* G, int64_t ldg, int64_t nt, int64_t nb, float* dX, int64_t ldx);

using ForwardFn = void (*)(const int8_t* q, const float* d, const int32_t* sum, int64_t ldq, int64_t nt,
                          const ForwardPanel& p, int64_t nr, float* Y, int64_t ldy);
template <ForwardFn Forward>
void forward_pair_by_calls(const int8_t* q, const float* d, const int32_t* sum, int64_t ldq, int64_t nt,
                           const ForwardPanel& p0, const ForwardPanel& p1, int64_t nr1, float* Y, int64_t ldy) {
  Forward(q, d, sum, ldq, nt, p0, 8, Y, ldy);
  Forward(q, d, sum, ldq, nt, p1, nr1, Y + 8, ldy);
}

const Int8Kernels& int8_kernels_scalar();
// The x86-64 sets: one source (kernels_int8_avx2_body.h) compiled for plain AVX2 ("avx2":
// vpmaddubsw), AVX-VNNI ("avx2-vnni": VEX vpdpbusd) and AVX-512 VNNI ("avx512-vnni": EVEX
// vpdpbusd); all give the same bits. int8_kernels_avx2() is the engine's: nullptr without
// AVX2 (build or CPU); else the set the environment variable NL_INT8_VNNI forces
//   0 or avx2     plain AVX2, no VNNI
//   avx-vnni      the AVX-VNNI set (an nl::Error where the CPU lacks it)
//   avx512-vnni   the AVX-512 VNNI set (an nl::Error where the CPU or OS lacks it)
//   auto, 1, unset or empty: the fastest the CPU runs: avx512-vnni where the CPU has it
//   (with or without AVX-VNNI: measured on Zen 5, kernels_int8_avx2.cpp), else avx2-vnni,
//   else avx2.
// The others return their set where the CPU runs it, else nullptr (for tests and benches).
const Int8Kernels* int8_kernels_avx2();
// The choice int8_kernels_avx2() makes once, for a value of NL_INT8_VNNI (null: unset).
const Int8Kernels* int8_kernels_avx2_choice(const char* nl_int8_vnni);
const Int8Kernels* int8_kernels_avx2_plain();
const Int8Kernels* int8_kernels_avx2_vnni();    // nullptr without AVX-VNNI (build or CPU)
const Int8Kernels* int8_kernels_avx512_vnni();  // nullptr without AVX512F/BW/VL/VNNI
// The VNNI sets' code with vpdpbusd emulated by AVX2 instructions (same bits, slower): for
// tests on CPUs without VNNI (and qemu). nullptr without AVX2; never chosen by the engine.
const Int8Kernels* int8_kernels_avx2_vnni_emulated();
// nullptr off aarch64; the sdot set when the CPU has the dot-product extension, else the
// widening one of the ARMv8.0 baseline. Both are also reachable directly for tests (the sdot
// one is nullptr on a CPU without the extension).
const Int8Kernels* int8_kernels_neon();
const Int8Kernels* int8_kernels_neon_widening();
const Int8Kernels* int8_kernels_neon_dotprod();
// The int8 kernels for an engine isa name (dispatch.cpp): "scalar", "avx2", "neon", ...
// give that family's choice for this CPU (int8_kernels_avx2(), int8_kernels_neon()); a name
// as the cpu engine's isa() reports it, "PANEL, int8 SET" (engine_isa_name), gives the set
// named SET, which must run here (an nl::Error otherwise).
const Int8Kernels& int8_kernels_for(const std::string& isa);
// What the cpu engine's isa() reports: the panel kernels' isa and the int8 set's name
// ("avx2, int8 avx512-vnni"), the panel isa alone where that names the same set and would
// give it back ("scalar"; "avx2" under NL_INT8_VNNI=0; "neon" without dotprod).
// int8_kernels_for and the engine's isa option (select_kernels, select_int8_kernels) take
// it back.
std::string engine_isa_name(const char* panel_isa, const Int8Kernels& k);
// The panel part of such a name ("avx2" of "avx2, int8 avx512-vnni").
std::string panel_isa_of(const std::string& isa);
// The cpu engine's int8 set for its isa option `requested` ("auto" resolved through
// NL_ENGINE_ISA as select_kernels does) and the panel kernels' isa it chose: the set the
// request names, else int8_kernels_for(panel_isa).
const Int8Kernels& select_int8_kernels(const std::string& requested, const char* panel_isa);

// Whether set k runs int8 products faster than f32 ones on tiles of `type` (Q4_0, Q8_0, Q4_K,
// Q5_K or Q6_K; Q5_0 for Q5_0's Q8_0 tiles, whose Signed5 panels run Q5_K's kernels without
// its offsets; Q8_0 for the other types, whose Q8_0 copy it uses): yes (Q4_K runs Q4_0's
// kernels plus its offsets), except Q8_0 with the NEON widening set of cores without dotprod, which
// executes about as many instructions per multiply-add as the f32 NEON kernels or more
// (forward / input gradient per 1k multiply-adds, bench/arm64_icount.sh --cpu cortex-a53:
// Q8_0 472 / 492, Q4_0 349 / 316, f32 455 / 450). Q4_K (409 / 403 against 461 / 449) and
// Q6_K (408 / 387 against 459 / 447) count 11-13% fewer there, Q5_K 20% (369 / 359 against
// 464 / 452 at 128 x 512 and 128 tokens since its own widening kernels, dot_tokens_signed5;
// 428 / 460 before, not offered): offered
// (docs/performance/int8-q4k-native-2026-12-07-zen5.md, int8-q5k-native-2026-12-07-zen3.md,
// int8-q6k-native-2026-12-07-zen3.md). The scalar set: not measured, kept yes (the tests'
// reference for the int8 plan).
bool int8_beats_f32_on_stored_quants(const Int8Kernels& k, QType type);

// The input gradient's fixed-point steps (the definition above; every ISA matches them).
// A value that does not fit int16 (only a non-finite y or rho) gives -32768, as AVX2's
// conversion and saturating pack do.
inline int16_t round_to_int16(float v) {
  const float r = std::nearbyint(v);  // half to even
  return r >= -32768.0f && r <= 32767.0f ? static_cast<int16_t>(r) : static_cast<int16_t>(-32768);
}
inline int16_t grad_y16(float g, float inv) {
  const float y = g * inv;
  return round_to_int16(y * 256.0f);
}
inline int16_t grad_rho16(float rho) { return round_to_int16(rho * 16384.0f); }
// round(a b / 2^15), half up: vpmulhrsw's arithmetic (vqrdmulh's, short of saturation).
inline int32_t mul_round_q15(int32_t a, int32_t b) { return (a * b + (1 << 14)) >> 15; }
// qv = round(y rho): round(y16 rho16 / 2^15) is 128 y rho, then round(that / 128),
// saturated to int8 as the packs do (it only saturates for non-finite inputs). Where both
// y16 and rho16 are -32768 (a non-finite dY and a non-finite weight scale) the sets may
// differ: vpmulhrsw wraps that one product, vqrdmulh saturates it.
inline int8_t requantize_grad_value(int16_t y16, int16_t rho16) {
  const int32_t q = mul_round_q15(mul_round_q15(y16, rho16), 256);
  return static_cast<int8_t>(std::clamp(q, -128, 127));
}

// The scalar quantizer of one block of 32 values (the definition; every ISA matches it).
void quantize_block_scalar(const float* v, int8_t* q, float* d, int32_t* sum);

}  // namespace nl::engine
