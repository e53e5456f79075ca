// AdamW against hand-computed values and against torch.optim.AdamW; schedules; clipping.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "nightlora/host/optimizer.h"
#include "nightlora/host/schedule.h"
#include "nightlora/util/error.h"
#include "test_util.h"

namespace {

// A two-layer adapter with only q and down enabled (others disabled, so they must be skipped).
nl::LoraAdapter small_adapter(int64_t rank = 2) {
  nl::LoraAdapter a;
  a.cfg.rank = rank;
  a.n_layer = 2;
  a.pairs.resize(2 * nl::kNumProj);
  for (int64_t l = 0; l < 2; ++l)
    for (nl::Proj p : {nl::Proj::Q, nl::Proj::Down}) {
      nl::LoraPair& pr = a.at(l, p);
      pr.enabled = true;
      pr.in = 3;
      pr.out = 4;
      pr.A.resize(static_cast<size_t>(rank * pr.in));
      pr.B.resize(static_cast<size_t>(pr.out * rank));
    }
  return a;
}

// Deterministic, varied values: v(seed, i).
float val(int seed, size_t i) { return static_cast<float>(std::sin(0.7 * seed + 1.3 * static_cast<double>(i)) * 0.5); }

void fill(nl::LoraAdapter& a, int seed) {
  size_t k = 0;
  for (auto& p : a.pairs) {
    for (float& x : p.A) x = val(seed, k++);
    for (float& x : p.B) x = val(seed, k++);
  }
}

TEST(AdamW, MatchesHandComputedSteps) {
  nl::LoraAdapter p = small_adapter(), g = p.zeros_like();
  fill(p, 1);
  nl::LoraAdapter p0 = p;
  nl::AdamWOptions o;
  o.beta1 = 0.9;
  o.beta2 = 0.99;
  o.eps = 1e-8;
  o.weight_decay = 0.1;
  nl::AdamW opt(p, o);
  const double lr[3] = {0.01, 0.02, 0.005};
  // Independent double-precision bookkeeping for one element.
  const size_t pick = 3;
  double w = p0.at(1, nl::Proj::Down).A[pick], m = 0, v = 0;
  for (int t = 1; t <= 3; ++t) {
    fill(g, 10 + t);
    double gk = g.at(1, nl::Proj::Down).A[pick];
    opt.step(p, g, lr[t - 1]);
    w = w * (1 - lr[t - 1] * 0.1);
    m = 0.9 * m + 0.1 * gk;
    v = 0.99 * v + 0.01 * gk * gk;
    double mhat = m / (1 - std::pow(0.9, t)), vhat = v / (1 - std::pow(0.99, t));
    w -= lr[t - 1] * mhat / (std::sqrt(vhat) + 1e-8);
    EXPECT_NEAR(p.at(1, nl::Proj::Down).A[pick], w, 1e-6) << "step " << t;
  }
  EXPECT_EQ(opt.steps_taken(), 3);
  // The first update of Adam moves every element by about lr (sign of -g): check one B too.
  nl::LoraAdapter q = small_adapter(), gq = q.zeros_like();
  fill(gq, 5);
  nl::AdamW fresh(q, {});
  fresh.step(q, gq, 0.1);
  float gb = gq.at(0, nl::Proj::Q).B[1];
  EXPECT_NEAR(q.at(0, nl::Proj::Q).B[1], gb > 0 ? -0.1 : 0.1, 1e-5);
  // Disabled pairs stay empty and untouched.
  EXPECT_TRUE(q.at(0, nl::Proj::K).A.empty());
}

TEST(AdamW, RejectsMismatchedGradients) {
  nl::LoraAdapter p = small_adapter(2), g = small_adapter(3);
  nl::AdamW opt(p, {});
  EXPECT_THROW(opt.step(p, g, 0.1), nl::Error);
}

TEST(AdamW, MatchesTorch) {
  std::string py = nltest::python_with_torch();
  if (py.empty()) GTEST_SKIP() << "Debian's /usr/bin/python3 with torch is not installed";
  nl::LoraAdapter p = small_adapter(), g = p.zeros_like();
  fill(p, 2);
  nlohmann::json j;
  j["init"] = p.at(0, nl::Proj::Q).A;
  nl::AdamWOptions o;
  o.weight_decay = 0.05;
  o.beta2 = 0.95;
  nl::AdamW opt(p, o);
  const int steps = 6;
  for (int t = 0; t < steps; ++t) {
    fill(g, 20 + t);
    double lr = 0.01 * (1 + t % 3);
    j["grads"].push_back(g.at(0, nl::Proj::Q).A);
    j["lr"].push_back(lr);
    opt.step(p, g, lr);
  }
  nltest::TempDir td;
  nltest::write_text(td / "in.json", j.dump());
  const char* script = R"PY(
import json, sys, torch
j = json.load(open(sys.argv[1]))
w = torch.nn.Parameter(torch.tensor(j["init"], dtype=torch.float32))
opt = torch.optim.AdamW([w], lr=0.01, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.05)
for g, lr in zip(j["grads"], j["lr"]):
    for grp in opt.param_groups: grp["lr"] = lr
    w.grad = torch.tensor(g, dtype=torch.float32)
    opt.step()
print(json.dumps(w.detach().tolist()))
)PY";
  nltest::write_text(td / "adamw.py", script);
  auto r = nltest::run_cmd(py + " " + nltest::shq((td / "adamw.py").string()) + " " + nltest::shq((td / "in.json").string()));
  ASSERT_EQ(r.rc, 0) << r.err;
  std::vector<float> ref = nlohmann::json::parse(r.out).get<std::vector<float>>();
  const auto& ours = p.at(0, nl::Proj::Q).A;
  ASSERT_EQ(ref.size(), ours.size());
  for (size_t i = 0; i < ref.size(); ++i) EXPECT_NEAR(ours[i], ref[i], 1e-6 * (1 + std::fabs(ref[i]))) << i;
}

TEST(Clipping, GlobalNormAndScaling) {
  nl::LoraAdapter g = small_adapter();
  for (auto& p : g.pairs) {
    std::fill(p.A.begin(), p.A.end(), 1.0f);
    std::fill(p.B.begin(), p.B.end(), 1.0f);
  }
  const double n = std::sqrt(static_cast<double>(g.n_params()));  // 4 pairs x (6 + 8) ones
  EXPECT_NEAR(nl::global_grad_norm(g), n, 1e-9);
  // Below the cap: unchanged, the norm is still reported.
  EXPECT_NEAR(nl::clip_grad_norm(g, 100.0), n, 1e-9);
  EXPECT_FLOAT_EQ(g.at(0, nl::Proj::Q).A[0], 1.0f);
  // Above: scaled to the cap (torch's 1e-6 guard included).
  EXPECT_NEAR(nl::clip_grad_norm(g, 2.0), n, 1e-9);
  EXPECT_NEAR(nl::global_grad_norm(g), 2.0 * n / (n + 1e-6), 1e-6);
  // 0 disables clipping.
  nl::scale_grads(g, 10.0f);
  double before = nl::global_grad_norm(g);
  EXPECT_NEAR(nl::clip_grad_norm(g, 0.0), before, 1e-9);
  EXPECT_NEAR(nl::global_grad_norm(g), before, 1e-9);
}

TEST(Schedule, WarmupThenDecay) {
  nl::LrSchedule s{nl::ScheduleKind::Cosine, 1.0, 0.0, 4, 14};
  EXPECT_DOUBLE_EQ(s.at(0), 0.25);
  EXPECT_DOUBLE_EQ(s.at(3), 1.0);
  EXPECT_DOUBLE_EQ(s.at(4), 1.0);                   // decay starts at its peak
  EXPECT_NEAR(s.at(9), 0.5, 1e-12);                  // halfway through 10 decay steps
  EXPECT_NEAR(s.at(13), 0.5 * (1 + std::cos(M_PI * 0.9)), 1e-12);
  EXPECT_GT(s.at(13), 0.0);                          // the last step still learns
  s.kind = nl::ScheduleKind::Linear;
  EXPECT_NEAR(s.at(9), 0.5, 1e-12);
  EXPECT_NEAR(s.at(13), 0.1, 1e-12);
  s.kind = nl::ScheduleKind::Constant;
  EXPECT_DOUBLE_EQ(s.at(13), 1.0);
  EXPECT_DOUBLE_EQ(s.at(1), 0.5);
  nl::LrSchedule floor{nl::ScheduleKind::Linear, 1.0, 0.2, 0, 10};
  EXPECT_NEAR(floor.at(5), 0.6, 1e-12);
  EXPECT_EQ(nl::parse_schedule("linear"), nl::ScheduleKind::Linear);
  EXPECT_THROW(nl::parse_schedule("step"), nl::Error);
}

}  // namespace
