#include "nightlora/host/mezo.h"

#include <cmath>

#include "det_rng.h"
#include "nightlora/host/train_step.h"
#include "nightlora/util/error.h"

namespace nl {

TrainMethod parse_train_method(const std::string& name) {
  if (name == "first-order") return TrainMethod::FirstOrder;
  if (name == "mezo") return TrainMethod::Mezo;
  fail("--method " + name, "unknown training method", "use first-order (backpropagation) or mezo (forward-only)");
}

const char* train_method_name(TrainMethod m) { return m == TrainMethod::Mezo ? "mezo" : "first-order"; }

uint64_t mezo_step_key(uint64_t seed, int64_t step) {
  // A constant apart from the dropout streams' keys, which are hash(seed, step, micro-batch).
  return hash_combine(hash_combine(seed, 0x4D655A4F2D534744ull), static_cast<uint64_t>(step));
}

float mezo_direction_element(uint64_t key, size_t pair, int matrix, size_t index) {
  const uint64_t h = hash_combine(hash_combine(hash_combine(key, pair), static_cast<uint64_t>(matrix)), index);
  // Two 32-bit uniforms; u1 in (0, 1] so the logarithm is finite.
  const double u1 = (static_cast<double>(h >> 32) + 1.0) * (1.0 / 4294967296.0);
  const double u2 = static_cast<double>(h & 0xFFFFFFFFull) * (1.0 / 4294967296.0);
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
}

namespace {
// Calls f(matrix values, matrix id) for A and B of every enabled pair, in a fixed order.
template <typename Adapter, typename F>
void for_each_matrix(Adapter& a, F&& f) {
  for (size_t p = 0; p < a.pairs.size(); ++p) {
    auto& pr = a.pairs[p];
    if (!pr.enabled) continue;
    f(p, 0, pr.A);
    f(p, 1, pr.B);
  }
}

void check_same_shape(const LoraAdapter& a, const LoraAdapter& b) {
  if (a.pairs.size() != b.pairs.size()) fail("mezo", "adapters of different shapes");
  for (size_t p = 0; p < a.pairs.size(); ++p)
    if (a.pairs[p].enabled && (a.pairs[p].A.size() != b.pairs[p].A.size() || a.pairs[p].B.size() != b.pairs[p].B.size()))
      fail("mezo", "adapters of different shapes");
}
}  // namespace

void mezo_perturbed(const LoraAdapter& theta, uint64_t key, float scale, LoraAdapter& out) {
  check_same_shape(theta, out);
  out.cfg = theta.cfg;
  for_each_matrix(theta, [&](size_t p, int m, const std::vector<float>& src) {
    std::vector<float>& dst = m == 0 ? out.pairs[p].A : out.pairs[p].B;
    for (size_t i = 0; i < src.size(); ++i) dst[i] = src[i] + scale * mezo_direction_element(key, p, m, i);
  });
}

LoraAdapter mezo_direction(const LoraAdapter& like, uint64_t key) {
  LoraAdapter z = like.zeros_like();
  mezo_perturbed(z, key, 1.0f, z);
  return z;
}

MezoEstimate mezo_estimate(TrainStep& step, const std::vector<Batch>& micro, const LoraAdapter& theta,
                           LoraAdapter& scratch, uint64_t key, double eps) {
  if (!(eps > 0)) fail("--mezo-eps", "the perturbation size must be positive");
  auto loss_at = [&](float scale, int64_t& n_sup) {
    mezo_perturbed(theta, key, scale, scratch);
    double sum = 0;
    n_sup = 0;
    for (const Batch& b : micro) {
      StepResult r = step.forward_only(b, scratch);
      sum += r.loss_sum;
      n_sup += r.n_supervised;
    }
    return n_sup > 0 ? sum / static_cast<double>(n_sup) : 0.0;
  };
  MezoEstimate e;
  e.loss_plus = loss_at(static_cast<float>(eps), e.supervised);
  e.loss_minus = loss_at(static_cast<float>(-eps), e.supervised);
  e.projected_grad = (e.loss_plus - e.loss_minus) / (2.0 * eps);
  return e;
}

void mezo_update(LoraAdapter& theta, uint64_t key, double projected_grad, double lr, double weight_decay) {
  for_each_matrix(theta, [&](size_t p, int m, std::vector<float>& v) {
    for (size_t i = 0; i < v.size(); ++i) {
      const double z = mezo_direction_element(key, p, m, i);
      v[i] = static_cast<float>(v[i] - lr * (projected_grad * z + weight_decay * v[i]));
    }
  });
}

}  // namespace nl
