// Output-head loss on a chunk of supervised rows: NLL of the label under log-softmax, and
// its gradient (softmax − onehot) scaled by loss_scale, written over the logits in place.
// The exponentials are vec4's (a whole vocabulary per row, twice); each row's sum is kept
// in double, a vector of floats at a time.
#include <cmath>

#include "ops.h"
#include "vec4.h"

namespace nl {
namespace {

using vec4::f4;

// Σ exp(z[i] - m), accumulated in float over runs of 256 values and in double across runs.
double sum_exp(const float* z, int64_t V, float m) {
  constexpr int64_t kRun = 256;
  const f4 mv = vec4::splat(m);
  double sum = 0;
  int64_t i = 0;
  while (i + 4 <= V) {
    f4 run = {};
    for (const int64_t end = std::min(V, i + kRun); i + 4 <= end; i += 4) run += vec4::exp(vec4::load(z + i) - mv);
    sum += static_cast<double>(vec4::sum(run));
  }
  if (i < V) {
    f4 e = vec4::exp(vec4::load_n(z + i, V - i) - mv);
    for (int64_t l = V - i; l < 4; ++l) e[l] = 0.0f;
    sum += static_cast<double>(vec4::sum(e));
  }
  return sum;
}

// One row: returns its NLL and writes loss_scale · (softmax − onehot) over z.
NL_HOST_KERNEL
double cross_entropy_row(float* z, int32_t label, int64_t V, float loss_scale) {
  const float m = vec4::max_of(z, V);
  const double sum = sum_exp(z, V, m);
  const double nll = static_cast<double>(m) + std::log(sum) - static_cast<double>(z[label]);
  // softmax = exp(z - m) / sum, times the loss scale
  const f4 mv = vec4::splat(m), k = vec4::splat(static_cast<float>(loss_scale / sum));
  int64_t i = 0;
  for (; i + 4 <= V; i += 4) vec4::store(z + i, vec4::exp(vec4::load(z + i) - mv) * k);
  if (i < V) vec4::store_n(z + i, vec4::exp(vec4::load_n(z + i, V - i) - mv) * k, V - i);
  z[label] -= loss_scale;
  return nll;
}

}  // namespace

void cross_entropy_chunk(float* logits, const int32_t* labels, int64_t C, int64_t V, float loss_scale,
                         double* row_loss, ThreadPool& pool) {
  parallel_rows(pool, C, 4, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) row_loss[r] = cross_entropy_row(logits + r * V, labels[r], V, loss_scale);
  });
}

}  // namespace nl
