// The LoRA branch of an adapted projection: u = dropout(x), z = u·Aᵀ, y += scale·z·Bᵀ.
// Backward, given dy:
//   dB += scale·dyᵀ·z,   dz = scale·dy·B,   dA += dzᵀ·u,   dx += dropout_mask ⊙ (dz·A)
// Dropout masks come from a counter-based hash of (key, t, c), so recomputation regenerates
// them instead of storing them. Reductions over tokens are split over output elements so
// each is summed by one task in token order (deterministic for any thread count).
#include <algorithm>
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
  // y[t, o] += scale · Σ_j z[t,j]·B[o,j], as rank axpys over a block of outputs: B's block
  // is transposed on the stack (kBlockFloats) so the inner loop runs along contiguous o.
  constexpr int64_t kBlockFloats = kMaxLoraRank;
  const int64_t r = L.rank, block = std::max<int64_t>(1, kBlockFloats / r);
  parallel_rows(pool, T, 16, [&](int64_t t0, int64_t t1) {
    float bt[kBlockFloats];
    for (int64_t o0 = 0; o0 < L.out; o0 += block) {
      const int64_t nb = std::min(block, L.out - o0);
      for (int64_t o = 0; o < nb; ++o)
        for (int64_t j = 0; j < r; ++j) bt[j * nb + o] = L.scale * L.B[(o0 + o) * r + j];
      for (int64_t t = t0; t < t1; ++t) {
        float* yt = y + t * L.out + o0;
        for (int64_t j = 0; j < r; ++j) {
          const float a = z[t * r + j];
          const float* b = bt + j * nb;
          for (int64_t o = 0; o < nb; ++o) yt[o] += a * b[o];
        }
      }
    }
  });
}

void lora_backward_params(const LoraBranch& L, const float* x, const float* z, const float* dy, int64_t T, float* dA,
                          float* dB, float* u_scratch, float* dz, ThreadPool& pool) {
  const int64_t r = L.rank;
  // dB[o, j] += scale · Σ_t dy[t,o]·z[t,j], for a block of outputs at a time so dy is read
  // along its rows (each sum still runs over t in order: thread count does not matter).
  constexpr int64_t kAccFloats = kMaxLoraRank;
  const int64_t ob = std::max<int64_t>(1, std::min<int64_t>(16, kAccFloats / r));
  parallel_rows(pool, L.out, ob, [&](int64_t o0, int64_t o1) {
    float acc[kAccFloats];
    const int64_t nb = o1 - o0;
    std::fill(acc, acc + nb * r, 0.0f);
    for (int64_t t = 0; t < T; ++t) {
      const float* zt = z + t * r;
      for (int64_t o = 0; o < nb; ++o) {
        const float d = dy[t * L.out + o0 + o];
        float* a = acc + o * r;
        for (int64_t j = 0; j < r; ++j) a[j] += d * zt[j];
      }
    }
    for (int64_t o = 0; o < nb; ++o)
      for (int64_t j = 0; j < r; ++j) dB[(o0 + o) * r + j] += L.scale * acc[o * r + j];
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
  // (tokens outermost, so the task's slice of dA stays in cache while u streams through once)
  parallel_rows(pool, L.in, 64, [&](int64_t c0, int64_t c1) {
    for (int64_t t = 0; t < T; ++t) {
      const float* ut = u + t * L.in;
      for (int64_t j = 0; j < r; ++j) {
        const float d = dz[t * r + j];
        float* dAj = dA + j * L.in;
        for (int64_t c = c0; c < c1; ++c) dAj[c] += d * ut[c];
      }
    }
  });
}

void lora_backward_input(const LoraBranch& L, const float* dz, int64_t T, float* dx, ThreadPool& pool) {
  const int64_t r = L.rank;
  // dx[t, c] += mask[t,c] · Σ_j dz[t,j]·A[j,c]
  // (per block of columns: the rank rows of A are read along c, the sums kept on the stack)
  constexpr int64_t kCols = 512;
  parallel_rows(pool, T, 16, [&](int64_t t0, int64_t t1) {
    float acc[kCols];
    for (int64_t t = t0; t < t1; ++t) {
      float* dxt = dx + t * L.in;
      for (int64_t c0 = 0; c0 < L.in; c0 += kCols) {
        const int64_t nc = std::min(kCols, L.in - c0);
        std::fill(acc, acc + nc, 0.0f);
        for (int64_t j = 0; j < r; ++j) {
          const float d = dz[t * r + j];
          const float* Aj = L.A + j * L.in + c0;
          for (int64_t c = 0; c < nc; ++c) acc[c] += d * Aj[c];
        }
        if (L.dropout > 0.0f)
          for (int64_t c = 0; c < nc; ++c) dxt[c0 + c] += acc[c] * keep_factor(L, t, c0 + c);
        else
          for (int64_t c = 0; c < nc; ++c) dxt[c0 + c] += acc[c];
      }
    }
  });
}

}  // namespace nl
