// Output-head loss on a chunk of supervised rows: NLL of the label under log-softmax, and
// its gradient (softmax − onehot) scaled by loss_scale, written over the logits in place.
// Three passes over each row (a whole vocabulary): its max; e = exp(z − max) written over z
// and summed (in float over runs of 256 values, in double across runs); e times
// loss_scale / sum. Eight floats at a time, vec4's exponential; the row's last partial
// vector goes through a padded copy (padded with -inf for the exponentials).
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "ops.h"
#include "tile_products.h"
#include "vec4.h"

namespace nl {
namespace {

using vec4::f8;

// L floats as one vector (8: vec4::f8; 16: the AVX-512 build's).
using f16v = float __attribute__((vector_size(64)));
typedef float f16vu __attribute__((vector_size(64), aligned(4)));
template <int L>
using Vec = std::conditional_t<L == 8, f8, f16v>;
template <int L>
Vec<L> load(const float* p) {
  if constexpr (L == 8) return vec4::load8(p);
  else return *reinterpret_cast<const f16vu*>(p);
}
template <int L>
void store(float* p, Vec<L> v) {
  if constexpr (L == 8) vec4::store8(p, v);
  else *reinterpret_cast<f16vu*>(p) = v;
}

// z[i] = exp(z[i] - m); returns Σ z[i] (float over runs of 256 values, double across runs).
// L = 16 (the AVX-512 build): the exponentials 16 at a time, each 8-float half added to the
// run's sum in turn, as the 8-float steps add them (vec4's exponential is the same
// arithmetic lane by lane at any width): the same bits as L = 8.
template <int L>
double exp_in_place(float* z, int64_t V, float m) {
  constexpr int64_t kRun = 256;
  double sum = 0;
  int64_t i = 0;
  while (i + 8 <= V) {
    f8 run = {};
    const int64_t end = std::min(V, i + kRun);
    if constexpr (L == 16)
      for (; i + 16 <= end; i += 16) {
        const f16v e = vec4::exp(load<16>(z + i) - m);
        store<16>(z + i, e);
        run += __builtin_shufflevector(e, e, 0, 1, 2, 3, 4, 5, 6, 7);
        run += __builtin_shufflevector(e, e, 8, 9, 10, 11, 12, 13, 14, 15);
      }
    for (; i + 8 <= end; i += 8) {
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
template <int L>
double cross_entropy_row_by(float* z, int32_t label, int64_t V, float loss_scale) {
  const float m = vec4::max_of(z, V), z_label = z[label];
  const double sum = exp_in_place<L>(z, V, m);
  const double nll = static_cast<double>(m) + std::log(sum) - static_cast<double>(z_label);
  const float k = static_cast<float>(loss_scale / sum);  // softmax = e / sum, times the loss scale
  int64_t i = 0;
  for (; i + L <= V; i += L) store<L>(z + i, load<L>(z + i) * k);
  for (; i < V; ++i) z[i] *= k;
  z[label] -= loss_scale;
  return nll;
}

// The AVX-512 build of a row (x86-64 GCC builds, as tile_products.cpp's, and chosen by the
// same switch, tile::wide_vectors()): on Zen 5 the loss took 1.5% of the training step's CPU
// samples, its exponentials most of it.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define NL_LOSS_WIDE 1
__attribute__((target("arch=x86-64-v4"), flatten, noinline)) double cross_entropy_row_wide(float* z, int32_t label,
                                                                                          int64_t V,
                                                                                          float loss_scale) {
  return cross_entropy_row_by<16>(z, label, V, loss_scale);
}
#else
#define NL_LOSS_WIDE 0
#endif

NL_HOST_KERNEL
double cross_entropy_row(float* z, int32_t label, int64_t V, float loss_scale) {
#if NL_LOSS_WIDE
  if (tile::wide_vectors()) return cross_entropy_row_wide(z, label, V, loss_scale);
#endif
  return cross_entropy_row_by<8>(z, label, V, loss_scale);
}

}  // namespace

void cross_entropy_chunk(float* logits, const int32_t* labels, int64_t C, int64_t V, float loss_scale,
                         double* row_loss, ThreadPool& pool) {
  parallel_rows(pool, C, 4, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) row_loss[r] = cross_entropy_row(logits + r * V, labels[r], V, loss_scale);
  });
}

}  // namespace nl
