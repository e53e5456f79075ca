#include "row_matmul.h"

#include <vector>

#include "nightlora/quant/qtype.h"

namespace nl {

float dot(const float* a, const float* b, int64_t n) {
  float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) s[k] += a[i + k] * b[i + k];
  float tail = 0;
  for (; i < n; ++i) tail += a[i] * b[i];
  return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7])) + tail;
}

void matmul_rows(const TensorView& w, const float* x, int64_t T, float* y, ThreadPool& pool) {
  const int64_t rows = w.rows(), cols = w.cols();
  pool.parallel_ranges(rows, [&](int64_t r0, int64_t r1) {
    std::vector<float> row(static_cast<size_t>(cols));
    for (int64_t r = r0; r < r1; ++r) {
      dequantize_row(w.type, w.row(r), row.data(), cols);
      for (int64_t t = 0; t < T; ++t) y[t * rows + r] = dot(row.data(), x + t * cols, cols);
    }
  });
}

}  // namespace nl
