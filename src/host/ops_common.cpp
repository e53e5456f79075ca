// Small shared pieces of the host ops: row-parallel loops, embedding lookup, elementwise.
#include <string>

#include "nightlora/quant/qtype.h"
#include "nightlora/util/error.h"
#include "ops.h"

namespace nl {

void embedding_forward(const TensorView& tok_embd, const int32_t* tokens, int64_t T, float* x, ThreadPool& pool) {
  const int64_t vocab = tok_embd.rows(), d = tok_embd.cols();
  for (int64_t t = 0; t < T; ++t)
    if (tokens[t] < 0 || tokens[t] >= vocab)
      fail("batch token " + std::to_string(t), "token id " + std::to_string(tokens[t]) + " outside the vocabulary of " +
                                                   std::to_string(vocab));
  parallel_rows(pool, T, 32, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) dequantize_row(tok_embd.type, tok_embd.row(tokens[t]), x + t * d, d);
  });
}

void add_inplace(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

void add_bias(float* y, const float* b, int64_t rows, int64_t n) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < n; ++i) y[r * n + i] += b[i];
}

}  // namespace nl
