// RMSNorm and its backward. With r = 1/sqrt(mean(x²)+eps) and y = x·r·w:
//   dx_i = r·w_i·dy_i − x_i · r³/n · Σ_j w_j·dy_j·x_j
// Both row sums are kept in double, in two four-double vectors over eight values at a time
// (one scalar chain waited 4 cycles per value on its additions), the lanes added at the
// end: the summation order depends on n alone.
#include <cmath>

#include "ops.h"
#include "vec4.h"

namespace nl {
namespace {

using d4 = double __attribute__((vector_size(32)));

inline d4 widen(const float* p) { return __builtin_convertvector(vec4::load(p), d4); }

// Σ a_i·b_i·c_i in double (each product in double, as written); c = nullptr: Σ a_i·b_i.
template <bool kThree>
double sum_products(const float* a, const float* b, const float* c, int64_t n) {
  d4 s0 = {}, s1 = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    d4 p0 = widen(a + i) * widen(b + i), p1 = widen(a + i + 4) * widen(b + i + 4);
    if constexpr (kThree) {
      p0 *= widen(c + i);
      p1 *= widen(c + i + 4);
    }
    s0 += p0;
    s1 += p1;
  }
  const d4 s = s0 + s1;
  double sum = (s[0] + s[1]) + (s[2] + s[3]);
  for (; i < n; ++i) sum += kThree ? static_cast<double>(a[i]) * b[i] * c[i] : static_cast<double>(a[i]) * b[i];
  return sum;
}

NL_HOST_KERNEL
void forward_rows(const float* x, const float* w, int64_t r0, int64_t r1, int64_t n, float eps, float* y, float* rstd) {
  for (int64_t r = r0; r < r1; ++r) {
    const float* xr = x + r * n;
    const double ss = sum_products<false>(xr, xr, nullptr, n);
    const float rs = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + eps));
    rstd[r] = rs;
    float* yr = y + r * n;
    for (int64_t i = 0; i < n; ++i) yr[i] = xr[i] * rs * w[i];
  }
}

NL_HOST_KERNEL
void backward_rows(const float* dy, const float* x, const float* w, const float* rstd, int64_t r0, int64_t r1,
                   int64_t n, float* dx) {
  for (int64_t r = r0; r < r1; ++r) {
    const float* xr = x + r * n;
    const float* dyr = dy + r * n;
    const float rs = rstd[r];
    const double dot = sum_products<true>(w, dyr, xr, n);
    const float c = static_cast<float>(dot * rs * rs * rs / static_cast<double>(n));
    float* dxr = dx + r * n;
    for (int64_t i = 0; i < n; ++i) dxr[i] += rs * w[i] * dyr[i] - xr[i] * c;
  }
}

}  // namespace

void rmsnorm_forward(const float* x, const float* w, int64_t rows, int64_t n, float eps, float* y, float* rstd,
                     ThreadPool& pool) {
  parallel_rows(pool, rows, 64, [&](int64_t r0, int64_t r1) { forward_rows(x, w, r0, r1, n, eps, y, rstd); });
}

void rmsnorm_backward(const float* dy, const float* x, const float* w, const float* rstd, int64_t rows, int64_t n,
                      float* dx, ThreadPool& pool) {
  parallel_rows(pool, rows, 64, [&](int64_t r0, int64_t r1) { backward_rows(dy, x, w, rstd, r0, r1, n, dx); });
}

}  // namespace nl
