// The scalar panel kernels: the reference order of reference_products.h, on panels.
#include "kernels.h"

#include "nightlora/engine/reference_products.h"

namespace nl::engine {
namespace {

void forward_scalar(const float* X, int64_t ldx, int64_t nt, const float* P, int64_t ldp, int64_t nr, int64_t n,
                    float* Y, int64_t ldy, bool accumulate) {
  for (int64_t i = 0; i < nr; ++i)
    for (int64_t t = 0; t < nt; ++t) {
      const float s = dot_f32(X + t * ldx, P + i * ldp, n);
      Y[t * ldy + i] = accumulate ? Y[t * ldy + i] + s : s;
    }
}

void input_grad_scalar(const float* G, int64_t ldg, int64_t nt, const float* P, int64_t ldp, int64_t nr, int64_t n,
                       float* D, int64_t ldd) {
  for (int64_t i = 0; i < nr; ++i)
    for (int64_t t = 0; t < nt; ++t) {
      const float a = G[t * ldg + i];
      const float* w = P + i * ldp;
      float* d = D + t * ldd;
      for (int64_t k = 0; k < n; ++k) d[k] += a * w[k];
    }
}

}  // namespace

const PanelKernels& scalar_kernels() {
  static const PanelKernels k{"scalar", dequantize_tiles_scalar, forward_scalar, /*forward_chunk_cols=*/0,
                                input_grad_scalar, /*grad_panel_floats=*/8192,
                                /*grad_cols_per_task=*/128};
  return k;
}

}  // namespace nl::engine
