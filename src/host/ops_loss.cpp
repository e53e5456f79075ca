// Output-head loss on a chunk of supervised rows: NLL of the label under log-softmax, and
// its gradient (softmax − onehot) scaled by loss_scale, written over the logits in place.
#include <cmath>
#include <vector>

#include "ops.h"

namespace nl {

void cross_entropy_chunk(float* logits, const int32_t* labels, int64_t C, int64_t V, float loss_scale,
                         double* row_loss, ThreadPool& pool) {
  parallel_rows(pool, C, 4, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      float* z = logits + r * V;
      float m = z[0];
      for (int64_t i = 1; i < V; ++i) m = std::max(m, z[i]);
      double sum = 0;
      for (int64_t i = 0; i < V; ++i) sum += std::exp(static_cast<double>(z[i] - m));
      const double lse = static_cast<double>(m) + std::log(sum);
      row_loss[r] = lse - static_cast<double>(z[labels[r]]);
      for (int64_t i = 0; i < V; ++i) z[i] = loss_scale * static_cast<float>(std::exp(static_cast<double>(z[i]) - lse));
      z[labels[r]] -= loss_scale;
    }
  });
}

}  // namespace nl
