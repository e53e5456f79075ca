// Finite-difference checks of every adapter gradient kind (A and B of q, k, v, o, gate, up,
// down, in every layer) on tiny llama, qwen2 (QKV bias) and qwen3 (Q/K norm) models with
// grouped-query attention, three packed sequences and unsupervised positions, dropout off.
//
// Method: for each tensor X with analytic gradient g, and a unit direction u (one random,
// one along g), the central difference D(ε) = (L(X+εu) − L(X−εu)) / 2ε, extrapolated as
// (4·D(ε/2) − D(ε)) / 3 (Richardson, truncation error O(ε⁴)), must equal g·u to within
// 1e-3·|g| (|g| bounds every directional derivative; along g itself this is a relative
// error of 1e-3). The step runs in float, so the loss carries rounding noise of ~1e-5 on
// these tiny models; ε = 3e-2 keeps the quotient's noise near 3e-4 absolute (typically
// < 1e-3·|g|), while a wrong gradient (a missing term, a transposed index, a wrong
// scale) is off by a sizeable fraction of |g|. The PyTorch comparison (train_ref_test)
// checks the same gradients to 1e-4 against float64 autograd.
#include <cmath>
#include <random>

#include <gtest/gtest.h>

#include "nightlora/engine/frozen_engine.h"
#include "nightlora/host/train_step.h"
#include "tiny_model.h"

namespace {

using nltest::make_batch;
using nltest::make_tiny_model;

double dot(const std::vector<float>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

double norm(const std::vector<float>& a) {
  double s = 0;
  for (float v : a) s += static_cast<double>(v) * v;
  return std::sqrt(s);
}

class GradCheck : public ::testing::TestWithParam<std::string> {};

TEST_P(GradCheck, EveryAdapterGradientMatchesFiniteDifferences) {
  const std::string arch = GetParam();
  auto tm = make_tiny_model(arch, nl::QType::F32, 3, /*tied=*/arch == "qwen2");
  const nl::Model& model = *tm.model;
  auto engine = nl::make_engine(model, {"cpu", 2});
  nl::StepOptions so;
  so.threads = 2;
  so.loss_chunk = 7;  // several chunks, the last one partial
  nl::TrainStep step(model, *engine, so);
  nl::Batch batch = make_batch({9, 6, 7}, model.config.vocab, 2, 5);
  nl::LoraConfig lc;
  lc.rank = 4;
  lc.alpha = 8.0f;
  lc.seed = 11;
  nl::LoraAdapter adapter = nltest::random_adapter(model.config, lc, 17, 0.05f);
  nl::LoraAdapter grads = adapter.zeros_like();
  const nl::StepResult r = step.forward_backward(batch, adapter, grads, 1.0f, 0);
  ASSERT_EQ(r.n_supervised, batch.n_supervised());
  ASSERT_GT(r.loss_sum, 0.0);

  std::mt19937 rng(99);
  std::normal_distribution<double> nd(0.0, 1.0);
  const double eps = 3e-2;
  int checked = 0;
  double worst = 0;
  for (int64_t l = 0; l < model.config.n_layer; ++l)
    for (int p = 0; p < nl::kNumProj; ++p)
      for (int which = 0; which < 2; ++which) {
        const auto proj = static_cast<nl::Proj>(p);
        std::vector<float>& X = which == 0 ? adapter.at(l, proj).A : adapter.at(l, proj).B;
        const std::vector<float>& G = which == 0 ? grads.at(l, proj).A : grads.at(l, proj).B;
        const std::string name =
            arch + " layer " + std::to_string(l) + " " + nl::proj_name(proj) + (which == 0 ? ".A" : ".B");
        const double gnorm = norm(G);
        ASSERT_GT(gnorm, 1e-6) << name << ": gradient is zero";
        for (int dir = 0; dir < 2; ++dir) {
          std::vector<double> u(X.size());
          double un = 0;
          for (size_t i = 0; i < u.size(); ++i) {
            u[i] = dir == 0 ? nd(rng) : G[i];
            un += u[i] * u[i];
          }
          for (double& v : u) v /= std::sqrt(un);
          const std::vector<float> saved = X;
          auto loss_at = [&](double h) {
            for (size_t i = 0; i < X.size(); ++i) X[i] = static_cast<float>(saved[i] + h * u[i]);
            return step.forward_only(batch, adapter).loss_sum;
          };
          auto central = [&](double h) { return (loss_at(h) - loss_at(-h)) / (2 * h); };
          const double fd = (4 * central(eps / 2) - central(eps)) / 3;  // Richardson: error O(eps^4)
          X = saved;
          const double an = dot(G, u);
          const double err = std::fabs(fd - an) / gnorm;
          worst = std::max(worst, err);
          EXPECT_LT(err, 1e-3) << name << (dir == 0 ? " random direction" : " gradient direction")
                               << ": finite difference " << fd << ", analytic " << an;
          ++checked;
        }
      }
  EXPECT_EQ(checked, model.config.n_layer * nl::kNumProj * 2 * 2);
  std::printf("[gradcheck %s] %d directional checks, worst relative error %.2e\n", arch.c_str(), checked, worst);
}

INSTANTIATE_TEST_SUITE_P(Archs, GradCheck, ::testing::Values("llama", "qwen2", "qwen3"));

}  // namespace
