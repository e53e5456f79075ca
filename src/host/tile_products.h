// Small dense products on eight-float vectors (tile_products.cpp; where the CPU has AVX-512,
// on 16-float ones with the same results: wide_vectors below) for the host ops whose matrices are
// too small or too short-lived for the frozen engine: the attention tiles and the LoRA
// branch (rank-wide matrices). Each takes up to kTileRows row pointers (np or nx of them
// real) and streams the other operand's rows past them, so the kTileRows rows' partial
// results stay in registers. Summation order is fixed by the shapes alone: results do not
// depend on threads or on where the caller splits a loop over rows.
#pragma once
#include <cstdint>

namespace nl::tile {

inline constexpr int kTileRows = 8;

// S[a*lds + j] = scale · X_a·K_j for rows a < nx and j < nk (K_j = K + j*ldk; length n).
void dots(const float* const X[kTileRows], int nx, const float* K, int64_t ldk, int64_t nk, int64_t n, float scale,
          float* S, int64_t lds);

// Out_a = scale · Σ_{j<nk} P_a[j] · R_j for a < np (R_j = R + j*ldr; length n); with
// accumulate, Out_a += that instead.
void weighted_rows(const float* const P[kTileRows], int np, const float* R, int64_t ldr, int64_t nk, int64_t n,
                   float scale, float* const Out[kTileRows], bool accumulate);

// Y_j += scale · Σ_{a<np} P_a[j] · X_a for j < nk (Y_j = Y + j*ldy; length n).
void add_outer(const float* const P[kTileRows], int np, const float* const X[kTileRows], int64_t nk, int64_t n,
               float scale, float* Y, int64_t ldy);

// Y_i += scale · Σ_{t<nt} P[t*ldp + i] · X_t for i < np (<= kTileRows; Y_i = Y + i*ldy,
// X_t = X + t*ldx; length n): a sum over t of column i of P times row t of X, kept in
// registers over every t (the transposed-left product: a LoRA factor's gradient).
void weighted_cols(const float* P, int64_t ldp, int np, const float* X, int64_t ldx, int64_t nt, int64_t n,
                   float scale, float* Y, int64_t ldy);

// Whether weighted_rows, add_outer and weighted_cols run their AVX-512 build (16-float
// slabs, the same bits as the eight-float build: each output is one lane's chain): where
// the CPU and the OS have AVX-512 F/BW/CD/DQ/VL (x86-64 GCC builds), unless turned off.
bool wide_vectors_available();
bool wide_vectors();
// For tests and benchmarks: the eight-float build everywhere (off = true), or back.
void turn_wide_vectors_off(bool off);

}  // namespace nl::tile
