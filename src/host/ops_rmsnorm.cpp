// RMSNorm and its backward. With r = 1/sqrt(mean(x²)+eps) and y = x·r·w:
//   dx_i = r·w_i·dy_i − x_i · r³/n · Σ_j w_j·dy_j·x_j
#include <cmath>

#include "ops.h"

namespace nl {

void rmsnorm_forward(const float* x, const float* w, int64_t rows, int64_t n, float eps, float* y, float* rstd,
                     ThreadPool& pool) {
  parallel_rows(pool, rows, 64, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* xr = x + r * n;
      double ss = 0;
      for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(xr[i]) * xr[i];
      const float rs = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + eps));
      rstd[r] = rs;
      float* yr = y + r * n;
      for (int64_t i = 0; i < n; ++i) yr[i] = xr[i] * rs * w[i];
    }
  });
}

void rmsnorm_backward(const float* dy, const float* x, const float* w, const float* rstd, int64_t rows, int64_t n,
                      float* dx, ThreadPool& pool) {
  parallel_rows(pool, rows, 64, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* xr = x + r * n;
      const float* dyr = dy + r * n;
      const float rs = rstd[r];
      double dot = 0;
      for (int64_t i = 0; i < n; ++i) dot += static_cast<double>(w[i]) * dyr[i] * xr[i];
      const float c = static_cast<float>(dot * rs * rs * rs / static_cast<double>(n));
      float* dxr = dx + r * n;
      for (int64_t i = 0; i < n; ++i) dxr[i] += rs * w[i] * dyr[i] - xr[i] * c;
    }
  });
}

}  // namespace nl
