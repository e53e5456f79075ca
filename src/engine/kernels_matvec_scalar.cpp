// The scalar matrix-vector kernels (kernels_matvec.h): the int8 definition's loops on the
// tiles, and the choice of the set for an ISA.
#include <cmath>
#include <cstring>

#include "kernels_int8.h"
#include "kernels_matvec.h"
#include "nightlora/util/half.h"

namespace nl::engine {

void matvec_int8_group_scalar(const TiledMatrix& m, int64_t g, const int8_t* q, const float* d, int64_t nt, float* Y,
                              int64_t ldy) {
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
                       int64_t nt, float* Y, int64_t ldy) {
  for (int64_t g = g0; g < g1; ++g) matvec_int8_group_scalar(m, g, q, d, nt, Y, ldy);
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
