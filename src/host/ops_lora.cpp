// The LoRA branch of an adapted projection: u = dropout(x), z = u·Aᵀ, y += scale·z·Bᵀ.
// Backward, given dy:
//   dB += scale·dyᵀ·z,   dz = scale·dy·B,   dA += dzᵀ·u,   dx += dropout_mask ⊙ (dz·A)
// Dropout masks come from a counter-based hash of (key, t, c), so recomputation regenerates
// them instead of storing them. Reductions over tokens are split over output elements so
// each is summed by one task in token order (deterministic for any thread count).
#include <cstring>

#include "det_rng.h"
#include "nightlora/engine/reference_products.h"
#include "ops.h"

namespace nl {
namespace {

// Multiplier of x[t,c] in the dropped-out input: 0 or 1/(1-p).
inline float keep_factor(const LoraBranch& L, int64_t t, int64_t c) {
  const uint64_t bits = hash_combine(L.dropout_key, static_cast<uint64_t>(t * L.in + c));
  return uniform01(bits) < L.dropout ? 0.0f : 1.0f / (1.0f - L.dropout);
}

// u = dropout(x) for rows [t0, t1); returns x itself when dropout is off.
const float* dropped_rows(const LoraBranch& L, const float* x, int64_t t0, int64_t t1, float* u) {
  if (L.dropout <= 0.0f) return x;
  for (int64_t t = t0; t < t1; ++t)
    for (int64_t c = 0; c < L.in; ++c) u[t * L.in + c] = x[t * L.in + c] * keep_factor(L, t, c);
  return u;
}

}  // namespace

void lora_down(const LoraBranch& L, const float* x, int64_t T, float* z, ThreadPool& pool, float* u_scratch) {
  parallel_rows(pool, T, 16, [&](int64_t t0, int64_t t1) {
    std::vector<float> own(L.dropout > 0.0f && !u_scratch ? static_cast<size_t>(L.in) : 0);
    for (int64_t t = t0; t < t1; ++t) {
      const float* xt = x + t * L.in;
      if (L.dropout > 0.0f) {
        float* u = u_scratch ? u_scratch + t * L.in : own.data();
        for (int64_t c = 0; c < L.in; ++c) u[c] = xt[c] * keep_factor(L, t, c);
        xt = u;
      }
      for (int64_t j = 0; j < L.rank; ++j) z[t * L.rank + j] = dot_f32(xt, L.A + j * L.in, L.in);
    }
  });
}

void lora_up_add(const LoraBranch& L, const float* z, int64_t T, float* y, ThreadPool& pool) {
  parallel_rows(pool, T, 16, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t)
      for (int64_t o = 0; o < L.out; ++o) y[t * L.out + o] += L.scale * dot_f32(z + t * L.rank, L.B + o * L.rank, L.rank);
  });
}

void lora_backward_params(const LoraBranch& L, const float* x, const float* z, const float* dy, int64_t T, float* dA,
                          float* dB, float* u_scratch, float* dz, ThreadPool& pool) {
  const int64_t r = L.rank;
  // dB[o, j] += scale · Σ_t dy[t,o]·z[t,j]
  parallel_rows(pool, L.out, 16, [&](int64_t o0, int64_t o1) {
    for (int64_t o = o0; o < o1; ++o)
      for (int64_t j = 0; j < r; ++j) {
        float acc = 0;
        for (int64_t t = 0; t < T; ++t) acc += dy[t * L.out + o] * z[t * r + j];
        dB[o * r + j] += L.scale * acc;
      }
  });
  // dz[t, j] = scale · Σ_o dy[t,o]·B[o,j];  u = dropout(x)
  parallel_rows(pool, T, 16, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      float* dzt = dz + t * r;
      for (int64_t j = 0; j < r; ++j) dzt[j] = 0;
      for (int64_t o = 0; o < L.out; ++o) {
        const float g = L.scale * dy[t * L.out + o];
        const float* Bo = L.B + o * r;
        for (int64_t j = 0; j < r; ++j) dzt[j] += g * Bo[j];
      }
    }
    dropped_rows(L, x, t0, t1, u_scratch);
  });
  const float* u = L.dropout > 0.0f ? u_scratch : x;
  // dA[j, c] += Σ_t dz[t,j]·u[t,c]   (split over blocks of columns)
  parallel_rows(pool, L.in, 64, [&](int64_t c0, int64_t c1) {
    for (int64_t j = 0; j < r; ++j) {
      float* dAj = dA + j * L.in;
      for (int64_t t = 0; t < T; ++t) {
        const float d = dz[t * r + j];
        const float* ut = u + t * L.in;
        for (int64_t c = c0; c < c1; ++c) dAj[c] += d * ut[c];
      }
    }
  });
}

void lora_backward_input(const LoraBranch& L, const float* dz, int64_t T, float* dx, ThreadPool& pool) {
  const int64_t r = L.rank;
  // dx[t, c] += mask[t,c] · Σ_j dz[t,j]·A[j,c]
  parallel_rows(pool, T, 16, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      float* dxt = dx + t * L.in;
      for (int64_t c = 0; c < L.in; ++c) {
        float acc = 0;
        for (int64_t j = 0; j < r; ++j) acc += dz[t * r + j] * L.A[j * L.in + c];
        dxt[c] += L.dropout > 0.0f ? acc * keep_factor(L, t, c) : acc;
      }
    }
  });
}

}  // namespace nl
