// The inner products of the cpu engine, per instruction set. They work on a "panel": a few
// rows of W already dequantized to floats (by dequantize_tiles for tiled types, by
// nl::dequantize_row otherwise), which the caller reuses across a whole block of tokens.
//
// The scalar set reproduces the summation order of reference_products.h exactly; the SIMD
// sets use fused multiply-adds and their own order, so they agree with it to rounding.
#pragma once
#include <cstdint>
#include <string>

#include "tile_layout.h"

namespace nl::engine {

struct PanelKernels {
  const char* isa;
  DequantizeTilesFn dequantize_tiles;
  // Y[t*ldy + i] = sum_k X[t*ldx + k] * P[i*ldp + k]   for t < nt, i < nr, k < n,
  // added to Y's values when `accumulate` (a later column chunk, see forward_chunk_cols).
  void (*forward)(const float* X, int64_t ldx, int64_t nt, const float* P, int64_t ldp, int64_t nr, int64_t n,
                  float* Y, int64_t ldy, bool accumulate);
  // Columns of W per forward call: the engine dequantizes a few row groups this many columns
  // at a time and calls forward once per chunk (accumulating after the first), so the panel
  // stays in L1. 0: whole rows in one call (the scalar set, whose dot products must keep the
  // reference's summation order over every column).
  int64_t forward_chunk_cols;
  // D[t*ldd + k] += sum_i G[t*ldg + i] * P[i*ldp + k]   rows i in increasing order.
  // The panel may hold many row groups (nr > 8): the SIMD kernels keep blocks of D in
  // registers over all nr rows.
  void (*input_grad)(const float* G, int64_t ldg, int64_t nt, const float* P, int64_t ldp, int64_t nr, int64_t n,
                     float* D, int64_t ldd);
  // Floats of W (rows x the task's columns) in the panel the engine dequantizes per
  // input_grad call. A kernel reading the panel in place wants it in L1 (8192: 32 KiB); the
  // AVX2 one copies each column slab to a contiguous buffer, so its panels can be larger
  // than L1 (32768: 128 rows of a 256-column task): D passes through the registers once
  // per 128 rows.
  int64_t grad_panel_floats;
  // Columns of dX per input-gradient task (f32 and f16 modes): each task reads all of dY's
  // rows for its tokens, so wider tasks read dY fewer times (what tall matrices, whose dY
  // rows are long, need); narrower ones keep the task's block of dX closer to L1.
  int64_t grad_cols_per_task;
};

const PanelKernels& scalar_kernels();
// nullptr when this build or this CPU has no AVX2+FMA+F16C.
const PanelKernels* avx2_kernels();
// nullptr unless this is an arm64 build (every AArch64 CPU has NEON).
const PanelKernels* neon_kernels();

// "auto" (the best this CPU runs; the environment variable NL_ENGINE_ISA overrides it),
// "scalar", "avx2" or "neon". Throws nl::Error for an unknown or unavailable name.
const PanelKernels& select_kernels(const std::string& isa);

}  // namespace nl::engine
