// The scalar matrix-vector kernels (kernels_matvec.h): the int8 definition's loops on the
// tiles, and the choice of the set for an ISA.
#include <cmath>
#include <cstring>

#include "kernels_int8.h"
#include "kernels_matvec.h"
#include "nightlora/util/half.h"

namespace nl::engine {

namespace {

// A K-quant row group (the definition of kernels_int8.h on the stored quants): per 32-value
// block the integer sum of the values (Q4_K q - 8, Q5_K q - 16 with scales s; Q6_K q - 32,
// each half times its integer scale, with scale d) and the f32 chain; Q4_K/Q5_K's offsets
// in a second chain, added at the end.
void kquant_group_scalar(const TiledMatrix& m, int64_t g, const int8_t* q, const float* d, const float* z, int64_t nt,
                         float* Y, int64_t ldy) {
  const int64_t nr = m.group_rows(g), nsb = m.n_blocks(), nb = m.cols / kQ8Block;
  const bool q6 = m.type == QType::Q6_K;
  for (int64_t t = 0; t < nt; ++t)
    for (int64_t i = 0; i < nr; ++i) {
      float acc = 0.0f, corr = 0.0f;
      for (int64_t sb = 0; sb < nsb; ++sb) {
        const uint8_t* block = m.tile(g, sb) + static_cast<size_t>(i) * m.block_bytes;
        const KQuantBlockScales sc = q6 ? KQuantBlockScales{} : kquant_block_scales(block, kquant_mid(m.type));
        for (int j = 0; j < 8; ++j) {
          const int64_t b = sb * 8 + j;
          const int8_t* x = q + (t * nb + b) * kQ8Block;
          int32_t half[2] = {0, 0};
          for (int k = 0; k < 32; ++k) {
            const int v = q6 ? q6k_quant(block, 32 * j + k) - 32
                          : m.type == QType::Q5_K
                              ? q5k_quant(block, j, k) - 16
                              : ((block[kQ4KQuantsOffset + 32 * (j / 2) + k] >> (4 * (j % 2))) & 0x0F) - 8;
            half[k / 16] += v * x[k];
          }
          const float dx = d[t * nb + b];
          if (q6) {
            const int32_t isum = q6k_scale(block, 2 * j) * half[0] + q6k_scale(block, 2 * j + 1) * half[1];
            acc = std::fma(static_cast<float>(isum), q6k_d(block) * dx, acc);
          } else {
            acc = std::fma(static_cast<float>(half[0] + half[1]), sc.s[j] * dx, acc);
            corr = std::fma(sc.c[j], z[t * nb + b], corr);
          }
        }
      }
      Y[t * ldy + g * kTileRows + i] = q6 ? acc : acc + corr;
    }
}

}  // namespace

void matvec_int8_group_scalar(const TiledMatrix& m, int64_t g, const int8_t* q, const float* d, const float* z,
                              int64_t nt, float* Y, int64_t ldy) {
  if (m.type == QType::Q4_K || m.type == QType::Q5_K || m.type == QType::Q6_K)
    return kquant_group_scalar(m, g, q, d, z, nt, Y, ldy);
  const int64_t nr = m.group_rows(g), nb = m.n_blocks();
  const size_t quant_bytes = m.block_bytes - sizeof(uint16_t);
  const bool q4 = m.type == QType::Q4_0;
  for (int64_t t = 0; t < nt; ++t)
    for (int64_t i = 0; i < nr; ++i) {
      float acc = 0.0f;
      for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* tile = m.tile(g, b);
        uint16_t bits;
        std::memcpy(&bits, tile + i * 2, 2);
        const uint8_t* w = tile + static_cast<size_t>(nr) * 2 + static_cast<size_t>(i) * quant_bytes;
        const int8_t* x = q + (t * nb + b) * kQ8Block;
        int32_t isum = 0;
        for (int64_t j = 0; j < kQ8Block; ++j) {
          const int wv = q4 ? (j < 16 ? (w[j] & 0x0F) : (w[j - 16] >> 4)) - 8 : static_cast<int8_t>(w[j]);
          isum += wv * x[j];
        }
        acc = std::fma(static_cast<float>(isum), fp16_to_f32(bits) * d[t * nb + b], acc);
      }
      Y[t * ldy + g * kTileRows + i] = acc;
    }
}

namespace {

void int8_tiles_scalar(const TiledMatrix& m, int64_t g0, int64_t g1, const int8_t* q, const float* d, const int32_t*,
                       const float* z, int64_t nt, float* Y, int64_t ldy) {
  for (int64_t g = g0; g < g1; ++g) matvec_int8_group_scalar(m, g, q, d, z, nt, Y, ldy);
}

}  // namespace

const MatvecKernels& matvec_kernels_scalar() {
  static const MatvecKernels k{"scalar", int8_tiles_scalar, nullptr};
  return k;
}

const MatvecKernels& matvec_kernels_for(const std::string& isa) {
  if (isa == "avx2") {
    if (const MatvecKernels* k = matvec_kernels_avx512()) return *k;
    if (const MatvecKernels* k = matvec_kernels_avx2_vnni()) return *k;
    if (const MatvecKernels* k = matvec_kernels_avx2()) return *k;
  }
  if (isa == "neon")
    if (const MatvecKernels* k = matvec_kernels_neon()) return *k;
  return matvec_kernels_scalar();
}

}  // namespace nl::engine
