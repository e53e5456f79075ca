#include "nightlora/engine/reference_products.h"

#include <cstring>
#include <vector>

#include "nightlora/quant/qtype.h"

namespace nl {

void reference_forward(const TensorView& W, const float* X, int64_t T, float* Y) {
  const int64_t rows = W.rows(), cols = W.cols();
  std::vector<float> w(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    dequantize_row(W.type, W.row(r), w.data(), cols);
    for (int64_t t = 0; t < T; ++t) Y[t * rows + r] = dot_f32(X + t * cols, w.data(), cols);
  }
}

void reference_input_grad(const TensorView& W, const float* dY, int64_t T, float* dX) {
  const int64_t rows = W.rows(), cols = W.cols();
  std::memset(dX, 0, static_cast<size_t>(T * cols) * sizeof(float));
  std::vector<float> w(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    dequantize_row(W.type, W.row(r), w.data(), cols);
    for (int64_t t = 0; t < T; ++t) {
      const float a = dY[t * rows + r];
      float* dx = dX + t * cols;
      for (int64_t c = 0; c < cols; ++c) dx[c] += a * w[c];
    }
  }
}

}  // namespace nl
