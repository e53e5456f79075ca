// SwiGLU: h = silu(g)·u with silu(g) = g·σ(g); silu'(g) = σ(g)·(1 + g·(1 − σ(g))).
// σ(g) = 1 / (1 + e^-g) with vec4's exponential, four values at a time (the last partial
// vector through a padded copy).
#include <type_traits>

#include "ops.h"
#include "vec4.h"

namespace nl {
namespace {

using vec4::f4;
using vec4::load_n;
using vec4::store_n;

inline f4 sigmoid(f4 g) { return vec4::splat(1.0f) / (vec4::splat(1.0f) + vec4::exp(-g)); }

// fn(i, n) for i in [i0, i1) in steps of 4, n = lanes in range: whole vectors first, the
// last partial one after (no branch in the main loop).
template <class F>
inline void by_vectors(int64_t i0, int64_t i1, F&& fn) {
  int64_t i = i0;
  for (; i + 4 <= i1; i += 4) fn(i, std::integral_constant<int64_t, 4>{});
  if (i < i1) fn(i, i1 - i);
}

NL_HOST_KERNEL
void swiglu_forward_range(const float* g, const float* u, float* h, int64_t i0, int64_t i1) {
  by_vectors(i0, i1, [&](int64_t i, auto nv) {
    const f4 gv = load_n(g + i, nv);
    store_n(h + i, gv * sigmoid(gv) * load_n(u + i, nv), nv);
  });
}

NL_HOST_KERNEL
void swiglu_backward_range(const float* dh, const float* g, const float* u, float* dg, float* du, int64_t i0,
                           int64_t i1) {
  by_vectors(i0, i1, [&](int64_t i, auto nv) {
    const f4 gv = load_n(g + i, nv), dhv = load_n(dh + i, nv), sg = sigmoid(gv);
    const f4 one = vec4::splat(1.0f);
    store_n(du + i, dhv * (gv * sg), nv);
    store_n(dg + i, dhv * load_n(u + i, nv) * sg * (one + gv * (one - sg)), nv);
  });
}

}  // namespace

void swiglu_forward(const float* g, const float* u, float* h, int64_t n, ThreadPool& pool) {
  parallel_rows(pool, n, 1 << 14, [&](int64_t i0, int64_t i1) { swiglu_forward_range(g, u, h, i0, i1); });
}

void swiglu_backward(const float* dh, const float* g, const float* u, float* dg, float* du, int64_t n,
                     ThreadPool& pool) {
  parallel_rows(pool, n, 1 << 14, [&](int64_t i0, int64_t i1) { swiglu_backward_range(dh, g, u, dg, du, i0, i1); });
}

}  // namespace nl
