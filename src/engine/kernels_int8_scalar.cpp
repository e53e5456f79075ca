// The scalar int8 kernels: straight loops over the panel layouts of kernels_int8.h. They
// define the results the SIMD sets must reproduce bit for bit.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels_int8.h"
#include "../quant/blocks.h"
#include "nightlora/util/half.h"

namespace nl::engine {
namespace {

// Byte offsets inside the panels (see kernels_int8.h).
inline size_t forward_index(int64_t b, int64_t row, int64_t col) {
  return static_cast<size_t>((b * 8 + col / 4) * 32 + row * 4 + col % 4);
}
inline size_t grad_index(int64_t b, int64_t row, int64_t col) {
  return static_cast<size_t>(((b * 4 + col / 8) * kGradChunks + row / 4) * 32 + (col % 8) * 4 + row % 4);
}

inline int weight_value(Int8Kind kind, uint8_t byte) {
  return kind == Int8Kind::Nibble ? static_cast<int>(byte) - 8 : static_cast<int>(static_cast<int8_t>(byte));
}

float tile_scale(const uint8_t* tile, int64_t i) {
  uint16_t bits;
  std::memcpy(&bits, tile + i * 2, 2);
  return fp16_to_f32(bits);
}

// Column j (< 32) of row i of a Q4_0/Q8_0 tile as the panel stores it: the Q4_0 nibble
// (unsigned) or the Q8_0 byte.
uint8_t tile_byte(const TiledMatrix& m, const uint8_t* tile, int64_t nr, int64_t i, int64_t j) {
  const size_t quant_bytes = m.block_bytes - sizeof(uint16_t);
  const uint8_t* q = tile + static_cast<size_t>(nr) * sizeof(uint16_t) + static_cast<size_t>(i) * quant_bytes;
  if (m.type == QType::Q4_0) return j < 16 ? (q[j] & 0x0F) : (q[j - 16] >> 4);
  return q[j];
}

// round half to even (the default rounding mode). Only a non-finite value leaves
// [-127, 127]; it gives -128, as the SIMD conversions do.
inline int8_t round_to_int8(float v) {
  const float r = std::nearbyint(v);
  return static_cast<int8_t>(r >= -128.0f && r <= 127.0f ? static_cast<int>(r) : -128);
}

void quantize_row_scalar(const float* x, int64_t n, int8_t* q, float* d, int32_t* sum) {
  float v[kQ8Block];
  for (int64_t b = 0; b * kQ8Block < n; ++b) {
    const int64_t c0 = b * kQ8Block;
    for (int64_t j = 0; j < kQ8Block; ++j) v[j] = c0 + j < n ? x[c0 + j] : 0.0f;
    quantize_block_scalar(v, q + c0, d + b, sum + b);
  }
}

// A Q4_K/Q5_K row group: each 32-value sub-block a panel block with scales s and offsets c
// (kquant_block_scales; the layout of kernels_int8.h): Q4_K's nibbles q, Q5_K's values q - 16.
void pack_forward_kquant_tiles_scalar(const TiledMatrix& m, int64_t g, ForwardPanel& p) {
  const int64_t nr = m.group_rows(g), nsb = m.n_blocks(), nb = nsb * 8;
  const bool q5 = m.type == QType::Q5_K;
  p.start_kquant(m.type, nb);
  for (int64_t sb = 0; sb < nsb; ++sb) {
    kquant_forward_panel_scales(m, g, sb, p);
    const uint8_t* tile = m.tile(g, sb);
    for (int64_t i = 0; i < 8; ++i) {
      const uint8_t* block = tile + static_cast<size_t>(i) * m.block_bytes;
      for (int j = 0; j < 8; ++j)
        for (int k = 0; k < kQ8Block; ++k) {
          uint8_t& out = p.q[forward_index(sb * 8 + j, i, k)];
          if (i >= nr)
            out = 0;
          else if (q5)
            out = static_cast<uint8_t>(q5k_quant(block, j, k) - 16);
          else
            out = (block[kQ4KQuantsOffset + 32 * (j / 2) + k] >> (4 * (j % 2))) & 0x0F;
        }
    }
  }
  if (q5) forward_weight_sums(p);
}

// A Q6_K row group: each 32-value block's values q - 32 (Signed6 panels), d as its scale
// and the two halves' integer scales (q6k_forward_panel_scales).
void pack_forward_q6k_tiles_scalar(const TiledMatrix& m, int64_t g, ForwardPanel& p) {
  const int64_t nr = m.group_rows(g), nsb = m.n_blocks();
  p.start_q6k(nsb * 8);
  for (int64_t sb = 0; sb < nsb; ++sb) {
    q6k_forward_panel_scales(m, g, sb, p);
    const uint8_t* tile = m.tile(g, sb);
    for (int64_t i = 0; i < 8; ++i)
      for (int k = 0; k < 256; ++k)
        p.q[forward_index(sb * 8 + k / 32, i, k % 32)] =
            i < nr ? static_cast<uint8_t>(q6k_quant(tile + static_cast<size_t>(i) * m.block_bytes, k) - 32) : 0;
  }
  forward_weight_sums(p);
}

void pack_forward_tiles_scalar(const TiledMatrix& m, int64_t g, ForwardPanel& p) {
  if (int8_has_offsets(m.type)) return pack_forward_kquant_tiles_scalar(m, g, p);
  if (m.type == QType::Q6_K) return pack_forward_q6k_tiles_scalar(m, g, p);
  const int64_t nr = m.group_rows(g), nb = m.n_blocks();
  p.kind = legacy_tile_kind(m);
  p.has_offsets = false;
  p.resize(nb);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* tile = m.tile(g, b);
    for (int64_t i = 0; i < 8; ++i) {
      p.d[static_cast<size_t>(b * 8 + i)] = i < nr ? tile_scale(tile, i) : 0.0f;
      for (int64_t j = 0; j < kQ8Block; ++j) p.q[forward_index(b, i, j)] = i < nr ? tile_byte(m, tile, nr, i, j) : 0;
    }
  }
  if (is_signed(p.kind)) forward_weight_sums(p);
}

// Rows of a Q4_K/Q5_K row block: each sub-block's values q - 8 (Q4_K) or q - 16 (Q5_K) with
// scales s (the offsets are grad_offset_sums').
void pack_grad_kquant_tiles_scalar(const TiledMatrix& m, int64_t rb, int64_t b0, int64_t b1, GradPanel& p) {
  const bool q5 = m.type == QType::Q5_K;
  p.kind = kquant_kind(m.type);
  p.resize(b1 - b0);
  for (int64_t r = 0; r < kGradRowBlock; ++r) {
    const int64_t row = rb * kGradRowBlock + r, g = row / kTileRows, i = row % kTileRows;
    const bool valid = row < m.rows;
    for (int64_t b = b0; b < b1; ++b) {
      const int j = static_cast<int>(b % 8);
      const uint8_t* block = valid ? m.tile(g, b / 8) + static_cast<size_t>(i) * m.block_bytes : nullptr;
      p.rho[static_cast<size_t>((b - b0) * kGradRowBlock + r)] = valid ? kquant_scale(block, j) : 0.0f;
      for (int k = 0; k < kQ8Block; ++k)
        p.q[grad_index(b - b0, r, k)] =
            !valid ? 0
            : q5   ? static_cast<uint8_t>(q5k_quant(block, j, k) - 16)
                   : static_cast<uint8_t>(((block[kQ4KQuantsOffset + 32 * (j / 2) + k] >> (4 * (j % 2))) & 0x0F) - 8);
    }
  }
  normalize_grad_scales(p);
}

// Rows of a Q6_K row block: the values q - 32, the scales d sc of each half (two parts).
void pack_grad_q6k_tiles_scalar(const TiledMatrix& m, int64_t rb, int64_t b0, int64_t b1, GradPanel& p) {
  p.kind = Int8Kind::Signed6;
  p.resize(b1 - b0, 2);
  for (int64_t r = 0; r < kGradRowBlock; ++r) {
    const int64_t row = rb * kGradRowBlock + r, g = row / kTileRows, i = row % kTileRows;
    const bool valid = row < m.rows;
    for (int64_t b = b0; b < b1; ++b) {
      const int j = static_cast<int>(b % 8);
      const uint8_t* block = valid ? m.tile(g, b / 8) + static_cast<size_t>(i) * m.block_bytes : nullptr;
      for (int h = 0; h < 2; ++h)
        p.rho[static_cast<size_t>(((b - b0) * 2 + h) * kGradRowBlock + r)] =
            valid ? q6k_d(block) * static_cast<float>(q6k_scale(block, 2 * j + h)) : 0.0f;
      for (int k = 0; k < kQ8Block; ++k)
        p.q[grad_index(b - b0, r, k)] = valid ? static_cast<uint8_t>(q6k_quant(block, 32 * j + k) - 32) : 0;
    }
  }
  normalize_grad_scales(p);
}

void pack_grad_tiles_scalar(const TiledMatrix& m, int64_t rb, int64_t b0, int64_t b1, GradPanel& p) {
  if (int8_has_offsets(m.type)) return pack_grad_kquant_tiles_scalar(m, rb, b0, b1, p);
  if (m.type == QType::Q6_K) return pack_grad_q6k_tiles_scalar(m, rb, b0, b1, p);
  p.kind = legacy_tile_kind(m);
  p.resize(b1 - b0);
  for (int64_t r = 0; r < kGradRowBlock; ++r) {
    const int64_t row = rb * kGradRowBlock + r, g = row / kTileRows, i = row % kTileRows;
    const bool valid = row < m.rows;
    for (int64_t b = b0; b < b1; ++b) {
      const uint8_t* tile = valid ? m.tile(g, b) : nullptr;
      p.rho[static_cast<size_t>((b - b0) * kGradRowBlock + r)] = valid ? tile_scale(tile, i) : 0.0f;
      for (int64_t j = 0; j < kQ8Block; ++j)  // the weight values as signed bytes (kernels_int8.h)
        p.q[grad_index(b - b0, r, j)] =
            valid ? static_cast<uint8_t>(weight_value(p.kind, tile_byte(m, tile, m.group_rows(g), i, j))) : 0;
    }
  }
  normalize_grad_scales(p);
}

void int8_forward_scalar(const int8_t* q, const float* d, const int32_t*, int64_t ldq, int64_t nt,
                         const ForwardPanel& p, int64_t nr, float* Y, int64_t ldy) {
  const int64_t blocks = ldq / kQ8Block;
  for (int64_t t = 0; t < nt; ++t)
    for (int64_t i = 0; i < nr; ++i) {
      float acc = 0.0f;
      for (int64_t b = 0; b < p.blocks; ++b) {
        int32_t isum = 0, half[2] = {0, 0};
        for (int64_t j = 0; j < kQ8Block; ++j)
          half[j / 16] += weight_value(p.kind, p.q[forward_index(b, i, j)]) * q[t * ldq + b * kQ8Block + j];
        if (p.kind == Int8Kind::Signed6)  // the halves' integer scales (kernels_int8.h)
          isum = p.sub_scale(b, 0, i) * half[0] + p.sub_scale(b, 1, i) * half[1];
        else
          isum = half[0] + half[1];
        acc = std::fma(static_cast<float>(isum), p.d[static_cast<size_t>(b * 8 + i)] * d[t * blocks + b], acc);
      }
      Y[t * ldy + i] = acc;
    }
}

void grad_rows_scalar(const float* g, int64_t n, float* ey, int16_t* y, int64_t ldb) {
  for (int64_t R = 0; R * kGradRowBlock < n; ++R) {
    const int64_t r0 = R * kGradRowBlock, nrows = std::min(kGradRowBlock, n - r0);
    float inv;
    ey[R] = grad_block_scale(g + r0, nrows, &inv);
    for (int64_t r = 0; r < kGradRowBlock; ++r) y[R * ldb + r] = r < nrows ? grad_y16(g[r0 + r], inv) : 0;
  }
}

void int8_input_grad_scalar(const int16_t* Y, int64_t ldg, const float* ey, int64_t lds, int64_t nt,
                            const GradPanel& p, int64_t n, const GradOut& out) {
  int8_t qv[kGradRowBlock];
  const int64_t width = kQ8Block / p.parts;  // columns per scale block
  for (int64_t t = 0; t < nt; ++t)
    for (int64_t s = 0; s < p.scale_blocks(); ++s) {
      const int64_t b = s / p.parts;
      for (int64_t r = 0; r < kGradRowBlock; ++r)
        qv[r] = requantize_grad_value(Y[t * ldg + r], p.rho16[static_cast<size_t>(s * kGradRowBlock + r)]);
      const float e = ey[t * lds] * p.m[static_cast<size_t>(s)];
      for (int64_t j = (s % p.parts) * width; j < (s % p.parts + 1) * width && b * kQ8Block + j < n; ++j) {
        int32_t isum = 0;
        for (int64_t r = 0; r < kGradRowBlock; ++r) isum += static_cast<int8_t>(p.q[grad_index(b, r, j)]) * qv[r];
        const int64_t c = b * kQ8Block + j;
        const float acc = out.acc ? out.acc[t * out.lda + c] : 0.0f;
        out.D[t * out.ldd + c] = std::fma(static_cast<float>(isum), e, acc);
      }
    }
}

}  // namespace

KQuantBlockScales kquant_block_scales(const uint8_t* block, float mid) {
  uint16_t d16, dmin16;  // (the block's first bytes: d, dmin, then the scales and mins)
  std::memcpy(&d16, block, 2);
  std::memcpy(&dmin16, block + 2, 2);
  const float d = fp16_to_f32(d16), dmin = fp16_to_f32(dmin16);
  // unpack_scale_min_k4 for the 8 sub-blocks at once, 4 bytes per word (little-endian):
  // sub-blocks 0-3 are the low 6 bits of bytes 0-3 (scales) and 4-7 (mins); 4-7 take their
  // low 4 bits from the nibbles of bytes 8-11 and their top 2 from the top bits of 0-3 / 4-7.
  uint32_t u[3];
  std::memcpy(u, block + 4, sizeof u);
  const uint32_t six = 0x3f3f3f3f, four = 0x0f0f0f0f, top = 0x30303030;
  const uint32_t sc_words[2] = {u[0] & six, (u[2] & four) | ((u[0] >> 2) & top)};
  const uint32_t mn_words[2] = {u[1] & six, ((u[2] >> 4) & four) | ((u[1] >> 2) & top)};
  uint8_t sc[8], mn[8];
  std::memcpy(sc, sc_words, sizeof sc);
  std::memcpy(mn, mn_words, sizeof mn);
  KQuantBlockScales out;
  for (int j = 0; j < 8; ++j) {
    // d sc and dmin mn are exact (11-bit by 6-bit), and so is mid s (mid a power of two),
    // so however a compiler fuses the subtraction, c is mid s - o rounded once.
    out.s[j] = d * static_cast<float>(sc[j]);
    out.c[j] = mid * out.s[j] - dmin * static_cast<float>(mn[j]);
  }
  return out;
}

void kquant_forward_panel_scales(const TiledMatrix& m, int64_t g, int64_t sb, ForwardPanel& p) {
  const int64_t nr = m.group_rows(g);
  const uint8_t* tile = m.tile(g, sb);
  const float mid = kquant_mid(m.type);
  for (int64_t i = 0; i < 8; ++i) {
    const KQuantBlockScales sc =
        i < nr ? kquant_block_scales(tile + static_cast<size_t>(i) * m.block_bytes, mid) : KQuantBlockScales{};
    for (int64_t j = 0; j < 8; ++j) {
      p.d[static_cast<size_t>((sb * 8 + j) * 8 + i)] = sc.s[j];
      p.offset[static_cast<size_t>((sb * 8 + j) * 8 + i)] = sc.c[j];
    }
  }
}

void q6k_forward_panel_scales(const TiledMatrix& m, int64_t g, int64_t sb, ForwardPanel& p) {
  const int64_t nr = m.group_rows(g);
  const uint8_t* tile = m.tile(g, sb);
  for (int64_t i = 0; i < 8; ++i) {
    const uint8_t* block = tile + static_cast<size_t>(i) * m.block_bytes;
    const float d = i < nr ? q6k_d(block) : 0.0f;
    for (int64_t j = 0; j < 8; ++j) {
      p.d[static_cast<size_t>((sb * 8 + j) * 8 + i)] = d;
      for (int h = 0; h < 2; ++h)
        p.sub_scales[static_cast<size_t>(((sb * 8 + j) * 2 + h) * 8 + i)] =
            i < nr ? scale_pair(q6k_scale(block, static_cast<int>(2 * j + h))) : 0;
    }
  }
}

void forward_offset_factors(const float* d, const int32_t* sum, int64_t n, float* z) {
  for (int64_t i = 0; i < n; ++i) z[i] = d[i] * static_cast<float>(sum[i]);
}

void add_forward_offsets_scalar(const float* z, int64_t ldz, int64_t nt, const ForwardPanel* const* p, int64_t np,
                                int64_t nr_last, float* Y, int64_t ldy) {
  for (int64_t g = 0; g < np; ++g)
    for (int64_t t = 0; t < nt; ++t)
      for (int64_t i = 0; i < (g == np - 1 ? nr_last : 8); ++i) {
        float corr = 0.0f;
        for (int64_t b = 0; b < p[g]->blocks; ++b)
          corr = std::fma(p[g]->offset[static_cast<size_t>(b * 8 + i)], z[t * ldz + b], corr);
        Y[t * ldy + 8 * g + i] += corr;
      }
}

void grad_offset_sums_scalar(const float* dY, int64_t ldy, int64_t nt, int64_t nrows, const float* C, int64_t ldc,
                             int64_t nb, float* G, int64_t ldg) {
  for (int64_t t = 0; t < nt; ++t)
    for (int64_t b = 0; b < nb; ++b) {
      float acc = G[t * ldg + b];
      for (int64_t r = 0; r < nrows; ++r) acc = std::fma(C[r * ldc + b], dY[t * ldy + r], acc);
      G[t * ldg + b] = acc;
    }
}

void spread_grad_offsets_scalar(const float* G, int64_t ldg, int64_t nt, int64_t nb, float* dX, int64_t ldx) {
  for (int64_t t = 0; t < nt; ++t)
    for (int64_t b = 0; b < nb; ++b) {
      const float g = G[t * ldg + b];
      float* x = dX + t * ldx + b * kQ8Block;
      for (int64_t k = 0; k < kQ8Block; ++k) x[k] += g;
    }
}

void quantize_block_scalar(const float* v, int8_t* q, float* d, int32_t* sum) {
  float amax = 0.0f;
  for (int64_t j = 0; j < kQ8Block; ++j) amax = std::max(amax, std::fabs(v[j]));
  const float scale = amax / 127.0f;
  const float inv = scale != 0.0f ? 1.0f / scale : 0.0f;
  int32_t s = 0;
  for (int64_t j = 0; j < kQ8Block; ++j) {
    q[j] = round_to_int8(v[j] * inv);
    s += q[j];
  }
  *d = scale;
  *sum = s;
}

float grad_block_scale(const float* g, int64_t nrows, float* inv) {
  float amax = 0.0f;
  for (int64_t r = 0; r < nrows; ++r) amax = std::max(amax, std::fabs(g[r]));
  const float ey = amax / 127.0f;
  *inv = ey != 0.0f ? 1.0f / ey : 0.0f;
  return ey;
}

void normalize_grad_scales(GradPanel& p) {
  for (int64_t b = 0; b < p.scale_blocks(); ++b) {
    float* rho = p.rho.data() + b * kGradRowBlock;
    float m = 0.0f;
    for (int64_t r = 0; r < kGradRowBlock; ++r) m = std::max(m, std::fabs(rho[r]));
    for (int64_t r = 0; r < kGradRowBlock; ++r) {
      rho[r] = m != 0.0f ? rho[r] / m : 0.0f;
      p.rho16[static_cast<size_t>(b * kGradRowBlock + r)] = grad_rho16(rho[r]);
    }
    p.m[static_cast<size_t>(b)] = m;
  }
}

void quantize_block_q8_0(const float* v, int64_t n, quant::BlockQ8_0* out) {
  float amax = 0.0f;
  for (int64_t j = 0; j < n; ++j) amax = std::max(amax, std::fabs(v[j]));
  // The smallest half >= amax / 127, so |w / d| <= 127 (the rounding to nearest could give
  // a smaller d, and a quant past 127). amax is not negative: the next half up is bits + 1.
  const float want = amax / 127.0f;
  uint16_t bits = f32_to_fp16(want);
  if (fp16_to_f32(bits) < want) ++bits;
  const float d = fp16_to_f32(bits);
  out->d = bits;
  for (int64_t j = 0; j < kQ8Block; ++j)
    out->qs[j] = j < n && d != 0.0f ? round_to_int8(v[j] / d) : static_cast<int8_t>(0);
}

void forward_weight_sums(ForwardPanel& p) {
  for (int64_t b = 0; b < p.blocks; ++b)
    for (int64_t i = 0; i < 8; ++i) {
      int32_t s[2] = {0, 0};
      for (int64_t j = 0; j < kQ8Block; ++j) s[j / 16] += static_cast<int8_t>(p.q[forward_index(b, i, j)]);
      p.wsum[static_cast<size_t>(b * 8 + i)] =
          p.kind == Int8Kind::Signed6 ? 128 * (p.sub_scale(b, 0, i) * s[0] + p.sub_scale(b, 1, i) * s[1])
                                      : 128 * (s[0] + s[1]);
    }
}

const Int8Kernels& int8_kernels_scalar() {
  static const Int8Kernels k{"scalar",
                             quantize_row_scalar,
                             pack_forward_tiles_scalar,
                             pack_grad_tiles_scalar,
                             int8_forward_scalar,
                             forward_pair_by_calls<int8_forward_scalar>,
                             grad_rows_scalar,
                             int8_input_grad_scalar,
                             nullptr,
                             add_forward_offsets_scalar,
                             grad_offset_sums_scalar,
          spread_grad_offsets_scalar};
  return k;
}

bool int8_beats_f32_on_stored_quants(const Int8Kernels& k, QType type) {
  return type == QType::Q4_0 || type == QType::Q5_0 || type == QType::Q4_K || type == QType::Q5_K || type == QType::Q6_K ||
         &k != int8_kernels_neon_widening();
}

}  // namespace nl::engine
