// Scalar reference versions of the two frozen products, straight from a (quantized) weight
// tensor with nl::dequantize_row: one row of W is dequantized at a time and used for every
// token. They are what faster kernels are tested against, and they define the summation
// order: Y[t,r] is a dot product over columns in `dot_f32` order, and dX[t,c] accumulates
// row contributions in increasing row order.
#pragma once
#include <cstdint>

#include "nightlora/modelio/model.h"

namespace nl {

// Dot product with eight independent partial sums (so the compiler can keep them in SIMD
// lanes without reordering anything), combined in a fixed order.
inline float dot_f32(const float* a, const float* b, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) acc[k] += a[i + k] * b[i + k];
  for (int k = 0; i < n; ++i, ++k) acc[k] += a[i] * b[i];
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

// Y (T x W.rows()) = X (T x W.cols()) · Wᵀ.
void reference_forward(const TensorView& W, const float* X, int64_t T, float* Y);
// dX (T x W.cols()) = dY (T x W.rows()) · W.
void reference_input_grad(const TensorView& W, const float* dY, int64_t T, float* dX);

}  // namespace nl
