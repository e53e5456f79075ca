// The LoRA branch of an adapted projection: u = dropout(x), z = u·Aᵀ, y += scale·z·Bᵀ.
// Backward, given dy:
//   dB += scale·dyᵀ·z,   dz = scale·dy·B,   dA += dzᵀ·u,   dx += dropout_mask ⊙ (dz·A)
// Every product is one of tile_products.h's, over blocks of kTileRows tokens. Dropout masks
// come from a counter-based hash of (key, t, c), so recomputation regenerates them instead
// of storing them. Reductions over tokens are split over output elements so each is summed
// by one task in token order (deterministic for any thread count).
#include <algorithm>
#include <vector>

#include "det_rng.h"
#include "ops.h"
#include "tile_products.h"

namespace nl {
namespace {

using tile::kTileRows;

// Multiplier of x[t,c] in the dropped-out input: 0 or 1/(1-p).
inline float keep_factor(const LoraBranch& L, int64_t t, int64_t c) {
  const uint64_t bits = hash_combine(L.dropout_key, static_cast<uint64_t>(t * L.in + c));
  return uniform01(bits) < L.dropout ? 0.0f : 1.0f / (1.0f - L.dropout);
}

// Rows [t0, t1) of u = dropout(x), row t at u + (t - t0) * in.
void dropped_rows(const LoraBranch& L, const float* x, int64_t t0, int64_t t1, float* u) {
  for (int64_t t = t0; t < t1; ++t)
    for (int64_t c = 0; c < L.in; ++c) u[(t - t0) * L.in + c] = x[t * L.in + c] * keep_factor(L, t, c);
}

// Pointers to rows t .. t+n-1 of M (row length ld, from column col); n = the rows left, at
// most kTileRows.
template <class M, class R>
int tile_rows(M* base, int64_t ld, int64_t col, int64_t t, int64_t T_end, R* rows[kTileRows]) {
  const int n = static_cast<int>(std::min<int64_t>(kTileRows, T_end - t));
  for (int a = 0; a < n; ++a) rows[a] = base + (t + a) * ld + col;
  return n;
}

// Runs fn(t, rows) over the token blocks of [t0, t1).
template <class F>
void token_blocks(int64_t t0, int64_t t1, F&& fn) {
  for (int64_t t = t0; t < t1; t += kTileRows) fn(t, static_cast<int>(std::min<int64_t>(kTileRows, t1 - t)));
}

constexpr int64_t kBlockFloats = kMaxLoraRank;  // floats of the transposed block of B

}  // namespace

void lora_down(const LoraBranch& L, const float* x, int64_t T, float* z, ThreadPool& pool, float* u_scratch) {
  parallel_rows(pool, T, 16, [&](int64_t t0, int64_t t1) {
    std::vector<float> own(L.dropout > 0.0f && !u_scratch ? static_cast<size_t>((t1 - t0) * L.in) : 0);
    const float* u = x;  // row t at u + (t - u_row0) * in
    int64_t u_row0 = 0;
    if (L.dropout > 0.0f) {
      float* dst = u_scratch ? u_scratch + t0 * L.in : own.data();
      dropped_rows(L, x, t0, t1, dst);
      u = dst;
      u_row0 = t0;
    }
    token_blocks(t0, t1, [&](int64_t t, int) {
      const float* rows[kTileRows];
      const int n = tile_rows(u, L.in, 0, t - u_row0, t1 - u_row0, rows);
      tile::dots(rows, n, L.A, L.in, L.rank, L.in, 1.0f, z + t * L.rank, L.rank);
    });
  });
}

void lora_up_add(const LoraBranch& L, const float* z, int64_t T, float* y, ThreadPool& pool) {
  // y[t, o0 + o] += scale · Σ_j z[t,j]·Bᵀ[j,o], a task per block of outputs over every token:
  // the task transposes (and scales) its block of B once, on the stack, so the product
  // streams along contiguous o.
  const int64_t r = L.rank, block = std::clamp<int64_t>(kBlockFloats / r, 1, 128);
  parallel_rows(pool, L.out, block, [&](int64_t o0, int64_t o1) {
    float bt[kBlockFloats];
    const int64_t nb = o1 - o0;
    for (int64_t o = 0; o < nb; ++o)
      for (int64_t j = 0; j < r; ++j) bt[j * nb + o] = L.scale * L.B[(o0 + o) * r + j];
    token_blocks(0, T, [&](int64_t t, int) {
      const float* zr[kTileRows];
      float* yr[kTileRows];
      const int n = tile_rows(z, r, 0, t, T, zr);
      tile_rows(y, L.out, o0, t, T, yr);
      tile::weighted_rows(zr, n, bt, nb, r, nb, 1.0f, yr, true);
    });
  });
}

void lora_backward_params(const LoraBranch& L, const float* x, const float* z, const float* dy, int64_t T, float* dA,
                          float* dB, float* u_scratch, float* dz, ThreadPool& pool) {
  const int64_t r = L.rank;
  // dB[o, :] += scale · Σ_t dy[t,o]·z[t,:], a task per block of outputs, kTileRows at a time, each
  // summed over the tokens in order in registers.
  parallel_rows(pool, L.out, 64, [&](int64_t o0, int64_t o1) {
    for (int64_t o = o0; o < o1; o += kTileRows)
      tile::weighted_cols(dy + o, L.out, static_cast<int>(std::min<int64_t>(kTileRows, o1 - o)), z, r, T, r, L.scale,
                          dB + o * r, r);
  });
  // dz[t, :] = scale · Σ_o dy[t,o]·B[o,:];  u = dropout(x)
  parallel_rows(pool, T, 16, [&](int64_t t0, int64_t t1) {
    token_blocks(t0, t1, [&](int64_t t, int) {
      const float* dyr[kTileRows];
      float* dzr[kTileRows];
      const int n = tile_rows(dy, L.out, 0, t, t1, dyr);
      tile_rows(dz, r, 0, t, t1, dzr);
      tile::weighted_rows(dyr, n, L.B, r, L.out, r, L.scale, dzr, false);
    });
    if (L.dropout > 0.0f) dropped_rows(L, x, t0, t1, u_scratch + t0 * L.in);
  });
  const float* u = L.dropout > 0.0f ? u_scratch : x;
  // dA[j, c] += Σ_t dz[t,j]·u[t,c], a task per block of columns, kTileRows rows j at a time, each
  // summed over the tokens in order in registers.
  parallel_rows(pool, L.in, 256, [&](int64_t c0, int64_t c1) {
    for (int64_t j = 0; j < r; j += kTileRows)
      tile::weighted_cols(dz + j, r, static_cast<int>(std::min<int64_t>(kTileRows, r - j)), u + c0, L.in, T, c1 - c0, 1.0f,
                          dA + j * L.in + c0, L.in);
  });
}

void lora_backward_input(const LoraBranch& L, const float* dz, int64_t T, float* dx, ThreadPool& pool) {
  const int64_t r = L.rank;
  // dx[t, :] += mask[t, :] ⊙ Σ_j dz[t,j]·A[j, :]  (without dropout: straight into dx)
  constexpr int64_t kCols = 512;
  parallel_rows(pool, T, 16, [&](int64_t t0, int64_t t1) {
    float acc[kTileRows][kCols];
    token_blocks(t0, t1, [&](int64_t t, int) {
      const float* dzr[kTileRows];
      float* dxr[kTileRows];
      const int n = tile_rows(dz, r, 0, t, t1, dzr);
      if (L.dropout <= 0.0f) {
        tile_rows(dx, L.in, 0, t, t1, dxr);
        return tile::weighted_rows(dzr, n, L.A, L.in, r, L.in, 1.0f, dxr, true);
      }
      for (int64_t c0 = 0; c0 < L.in; c0 += kCols) {
        const int64_t nc = std::min(kCols, L.in - c0);
        float* accr[kTileRows];
        for (int a = 0; a < kTileRows; ++a) accr[a] = acc[a];
        tile::weighted_rows(dzr, n, L.A + c0, L.in, r, nc, 1.0f, accr, false);
        for (int a = 0; a < n; ++a)
          for (int64_t c = 0; c < nc; ++c) dx[(t + a) * L.in + c0 + c] += acc[a][c] * keep_factor(L, t + a, c0 + c);
      }
    });
  });
}

}  // namespace nl
