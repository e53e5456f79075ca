// Matrix-vector kernels of the cpu engine: int8 products of one token (or a few) with Q4_0 /
// Q8_0 tiles and, in the scalar and AVX2 sets, Q4_K / Q5_K / Q6_K tiles (their stored quants,
// as the panel path takes them), as a decoder's one-token step runs them. Such a product is memory-bound: the
// panel path (kernels_int8.h) packs every row group into a panel before a block of tokens,
// which for one token costs more than the product itself. These kernels read each tile
// once, straight from the resident layout (tile_layout.h), for all the tokens of the call,
// and the engine splits the row groups across its threads.
//
// They compute the int8 mode's definition exactly (kernels_int8.h,
// precision_reference.h): activations quantized by Int8Kernels::quantize_row (per 32
// values), per block an exact integer dot product isum of the weights' quants with the
// activations', and per row and token an f32 chain over the blocks in increasing order,
// acc = fma(float(isum), dw[r,b] * dx[t,b], acc), with the K-quants' offsets (a second chain,
// added at the end) and Q6_K's per-16 integer scales as kernels_int8.h defines them. So a
// one-token product gives the same bits as the same token inside a prompt's block product:
// prefill and decode agree.
//
// Sets: scalar (the loops of the definition), AVX2 (vpmaddubsw / vpmaddwd), AVX-VNNI
// (vpdpbusd), NEON (widening vmull_s8 + vpadalq_s16 on the ARMv8.0 baseline).
//
// The AVX2 sets also run f32-mode products of a few tokens (f32_tiles): each tile is
// dequantized straight into its transposed form (8 rows per column vector, by a byte
// transpose), with the panel dequantizer's arithmetic, and consumed from L1 by FMA chains,
// four row groups at a time (four independent chains). Where the CPU has AVX-512 an
// AVX-512 set does the same for F16 and K-quant tiles with less work per weight
// (kernels_matvec_avx512.cpp: bytes and halves transposed before they are widened, 16 rows
// per vector, eight row groups' chains side by side).
#pragma once
#include <cstdint>
#include <string>

#include "tile_layout.h"

namespace nl::engine {

struct MatvecKernels {
  const char* isa;
  // Y[t*ldy + r] for the rows r of row groups [g0, g1) of m (Q4_0, Q8_0, Q4_K, Q5_K or Q6_K
  // tiles) and tokens t < nt: token t's quantized activations at
  // q + t*32*blocks, their scales and quant sums at d + t*blocks and sum + t*blocks, and for
  // Q4_K/Q5_K the offsets' factors at z + t*blocks (forward_offset_factors; else unused)
  // (blocks = m.cols / 32).
  void (*int8_tiles)(const TiledMatrix& m, int64_t g0, int64_t g1, const int8_t* q, const float* d,
                     const int32_t* sum, const float* z, int64_t nt, float* Y, int64_t ldy);
  // The f32 mode's forward on tiles (any tiled type), bit-identical to this ISA's panel
  // kernel (kernels.h): Y[t*ldy + r] for the rows of row groups [g0, g1) (whole groups of 8 rows) and tokens t < nt (X's row
  // t at X + t*ldx), each output one FMA chain over the columns in order from +0, as the
  // AVX2 forward computes it. nullptr in sets whose f32 forward has another summation order
  // (scalar: the reference's; NEON: lane-split dot products): those keep the panel path.
  void (*f32_tiles)(const TiledMatrix& m, int64_t g0, int64_t g1, const float* X, int64_t ldx, int64_t nt, float* Y,
                    int64_t ldy);
};

const MatvecKernels& matvec_kernels_scalar();
// nullptr without AVX2 + FMA + F16C (build or CPU).
const MatvecKernels* matvec_kernels_avx2();
// nullptr without AVX-VNNI (build or CPU) or with NL_INT8_VNNI=0 or =avx2.
const MatvecKernels* matvec_kernels_avx2_vnni();
// The AVX-512 f32 kernel (kernels_matvec_avx512.cpp) with the int8 kernel of the AVX2 set
// picked as above; nullptr without AVX-512 F + BW + VL (build or CPU) or with
// NL_MATVEC_AVX512=0 (the AVX2 set's f32 kernel then: the same bits).
const MatvecKernels* matvec_kernels_avx512();
// nullptr off aarch64.
const MatvecKernels* matvec_kernels_neon();
// The set for the engine's panel ISA ("scalar", "avx2", "neon"): the fastest this CPU runs.
const MatvecKernels& matvec_kernels_for(const std::string& isa);

// The scalar kernel for one row group, used by every set for a partial last group (fewer
// than 8 rows).
void matvec_int8_group_scalar(const TiledMatrix& m, int64_t g, const int8_t* q, const float* d, const float* z,
                              int64_t nt, float* Y, int64_t ldy);

}  // namespace nl::engine
