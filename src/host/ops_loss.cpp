// Output-head loss on a chunk of supervised rows: NLL of the label under log-softmax, and
// its gradient (softmax − onehot) scaled by loss_scale, written over the logits in place.
// Three passes over each row (a whole vocabulary): its max; e = exp(z − max) written over z
// and summed (in float over runs of 256 values, in double across runs); e times
// loss_scale / sum. Eight floats at a time, vec4's exponential; the row's last partial
// vector goes through a padded copy (padded with -inf for the exponentials).
#include <cmath>

#include "ops.h"
#include "vec4.h"

namespace nl {
namespace {

using vec4::f8;

// z[i] = exp(z[i] - m); returns Σ z[i] (float over runs of 256 values, double across runs).
double exp_in_place(float* z, int64_t V, float m) {
  constexpr int64_t kRun = 256;
  double sum = 0;
  int64_t i = 0;
  while (i + 8 <= V) {
    f8 run = {};
    for (const int64_t end = std::min(V, i + kRun); i + 8 <= end; i += 8) {
      const f8 e = vec4::exp(vec4::load8(z + i) - m);
      vec4::store8(z + i, e);
      run += e;
    }
    sum += static_cast<double>(vec4::sum(vec4::halves_sum(run)));
  }
  if (i < V) {  // padded with -inf, whose exponential is 0
    const f8 e = vec4::exp(vec4::load8_n(z + i, V - i, -__builtin_inff()) - m);
    vec4::store8_n(z + i, e, V - i);
    sum += static_cast<double>(vec4::sum(vec4::halves_sum(e)));
  }
  return sum;
}

// One row: returns its NLL and writes loss_scale · (softmax − onehot) over z.
NL_HOST_KERNEL
double cross_entropy_row(float* z, int32_t label, int64_t V, float loss_scale) {
  const float m = vec4::max_of(z, V), z_label = z[label];
  const double sum = exp_in_place(z, V, m);
  const double nll = static_cast<double>(m) + std::log(sum) - static_cast<double>(z_label);
  const float k = static_cast<float>(loss_scale / sum);  // softmax = e / sum, times the loss scale
  int64_t i = 0;
  for (; i + 8 <= V; i += 8) vec4::store8(z + i, vec4::load8(z + i) * k);
  for (; i < V; ++i) z[i] *= k;
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
