// SwiGLU: h = silu(g)·u with silu(g) = g·σ(g); silu'(g) = σ(g)·(1 + g·(1 − σ(g))).
#include <cmath>

#include "ops.h"

namespace nl {

void swiglu_forward(const float* g, const float* u, float* h, int64_t n, ThreadPool& pool) {
  parallel_rows(pool, n, 1 << 14, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const float sg = 1.0f / (1.0f + std::exp(-g[i]));
      h[i] = g[i] * sg * u[i];
    }
  });
}

void swiglu_backward(const float* dh, const float* g, const float* u, float* dg, float* du, int64_t n,
                     ThreadPool& pool) {
  parallel_rows(pool, n, 1 << 14, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const float sg = 1.0f / (1.0f + std::exp(-g[i]));
      const float silu = g[i] * sg;
      du[i] += dh[i] * silu;
      dg[i] += dh[i] * u[i] * sg * (1.0f + g[i] * (1.0f - sg));
    }
  });
}

}  // namespace nl
