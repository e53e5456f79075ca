#include "nightlora/host/optimizer.h"

#include <cmath>

#include "nightlora/util/error.h"

namespace nl {

namespace {

void check_same_shapes(const LoraAdapter& a, const LoraAdapter& b, const char* what) {
  bool ok = a.pairs.size() == b.pairs.size();
  for (size_t i = 0; ok && i < a.pairs.size(); ++i)
    ok = a.pairs[i].enabled == b.pairs[i].enabled && a.pairs[i].A.size() == b.pairs[i].A.size() &&
         a.pairs[i].B.size() == b.pairs[i].B.size();
  if (!ok) fail("AdamW", std::string(what) + " do not have the adapter's shapes");
}

}  // namespace

AdamW::AdamW(const LoraAdapter& params, const AdamWOptions& opt)
    : opt_(opt), m_(params.zeros_like()), v_(params.zeros_like()) {}

void AdamW::restore(const LoraAdapter& m, const LoraAdapter& v, int64_t steps_taken) {
  check_same_shapes(m_, m, "restored first moments");
  check_same_shapes(v_, v, "restored second moments");
  m_ = m;
  v_ = v;
  t_ = steps_taken;
}

void AdamW::restore_in_place(const std::function<void(LoraAdapter& m, LoraAdapter& v)>& fill, int64_t steps_taken) {
  fill(m_, v_);
  check_same_shapes(m_, v_, "restored second moments");
  t_ = steps_taken;
}

void AdamW::step(LoraAdapter& params, const LoraAdapter& grads, double lr) {
  check_same_shapes(params, grads, "gradients");
  check_same_shapes(params, m_, "optimizer moments");
  ++t_;
  const float b1 = static_cast<float>(opt_.beta1), b2 = static_cast<float>(opt_.beta2);
  const float eps = static_cast<float>(opt_.eps);
  // As torch: scalars in double, then used with float tensors.
  const double bc1 = 1.0 - std::pow(opt_.beta1, static_cast<double>(t_));
  const double bc2 = 1.0 - std::pow(opt_.beta2, static_cast<double>(t_));
  const float step_size = static_cast<float>(lr / bc1);
  const float bc2_sqrt = static_cast<float>(std::sqrt(bc2));
  const float decay = static_cast<float>(1.0 - lr * opt_.weight_decay);
  for (size_t i = 0; i < params.pairs.size(); ++i) {
    LoraPair& p = params.pairs[i];
    if (!p.enabled) continue;
    const LoraPair& g = grads.pairs[i];
    LoraPair& m = m_.pairs[i];
    LoraPair& v = v_.pairs[i];
    auto update = [&](std::vector<float>& w, const std::vector<float>& gw, std::vector<float>& mw,
                      std::vector<float>& vw) {
      for (size_t k = 0; k < w.size(); ++k) {
        float gk = gw[k];
        w[k] *= decay;
        mw[k] += (gk - mw[k]) * (1.0f - b1);  // torch: exp_avg.lerp_(grad, 1 - beta1)
        vw[k] = vw[k] * b2 + (1.0f - b2) * gk * gk;
        float denom = std::sqrt(vw[k]) / bc2_sqrt + eps;
        w[k] -= step_size * (mw[k] / denom);
      }
    };
    update(p.A, g.A, m.A, v.A);
    update(p.B, g.B, m.B, v.B);
  }
}

double global_grad_norm(const LoraAdapter& grads) {
  double s = 0;
  for (const auto& p : grads.pairs) {
    if (!p.enabled) continue;
    for (float x : p.A) s += static_cast<double>(x) * x;
    for (float x : p.B) s += static_cast<double>(x) * x;
  }
  return std::sqrt(s);
}

void scale_grads(LoraAdapter& grads, float s) {
  for (auto& p : grads.pairs) {
    if (!p.enabled) continue;
    for (float& x : p.A) x *= s;
    for (float& x : p.B) x *= s;
  }
}

double clip_grad_norm(LoraAdapter& grads, double max_norm) {
  double norm = global_grad_norm(grads);
  if (max_norm > 0) {
    double coef = max_norm / (norm + 1e-6);
    if (coef < 1.0) scale_grads(grads, static_cast<float>(coef));
  }
  return norm;
}

}  // namespace nl
