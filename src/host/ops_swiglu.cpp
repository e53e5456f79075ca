// SwiGLU: h = silu(g)·u with silu(g) = g·σ(g); silu'(g) = σ(g)·(1 + g·(1 − σ(g))).
// σ(g) = 1 / (1 + e^-g) with vec4's exponential, eight values at a time (the last partial
// vector through a padded copy).
#include <type_traits>

#include "ops.h"
#include "vec4.h"

namespace nl {
namespace {

using vec4::f8;
using vec4::load8_n;
using vec4::store8_n;

inline f8 sigmoid(f8 g) { return 1.0f / (1.0f + vec4::exp(-g)); }

// fn(i, n) for i in [i0, i1) in steps of 8, n = lanes in range: whole vectors first, the
// last partial one after (no branch in the main loop).
template <class F>
inline void by_vectors(int64_t i0, int64_t i1, F&& fn) {
  int64_t i = i0;
  for (; i + 8 <= i1; i += 8) fn(i, std::integral_constant<int64_t, 8>{});
  if (i < i1) fn(i, i1 - i);
}

NL_HOST_KERNEL
void swiglu_forward_range(const float* g, const float* u, float* h, int64_t i0, int64_t i1) {
  by_vectors(i0, i1, [&](int64_t i, auto nv) {
    const f8 gv = load8_n(g + i, nv);
    store8_n(h + i, gv * sigmoid(gv) * load8_n(u + i, nv), nv);
  });
}

NL_HOST_KERNEL
void swiglu_backward_range(const float* dh, const float* g, const float* u, float* dg, float* du, int64_t i0,
                           int64_t i1) {
  by_vectors(i0, i1, [&](int64_t i, auto nv) {
    const f8 gv = load8_n(g + i, nv), dhv = load8_n(dh + i, nv), sg = sigmoid(gv);
    store8_n(du + i, dhv * (gv * sg), nv);
    store8_n(dg + i, dhv * load8_n(u + i, nv) * sg * (1.0f + gv * (1.0f - sg)), nv);
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
