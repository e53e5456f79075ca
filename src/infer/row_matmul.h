// Products with a frozen weight matrix for inference: Y = X·Wᵀ, with W read row by row
// through the reference dequantizer into a small per-task scratch row that is then used for
// every input vector. The matrix is never dequantized as a whole.
#pragma once
#include <cstdint>

#include "nightlora/modelio/model.h"
#include "nightlora/util/thread_pool.h"

namespace nl {

// x: T x w.cols() row-major; y: T x w.rows() row-major (overwritten). Threaded over rows.
void matmul_rows(const TensorView& w, const float* x, int64_t T, float* y, ThreadPool& pool);

// Dot product with several partial sums (lets the compiler vectorize it).
float dot(const float* a, const float* b, int64_t n);

}  // namespace nl
