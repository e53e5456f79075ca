// The nightly gate's rule (nightly_gate.h) on hand-made per-item losses: every reason not to
// publish, ties, and a clear improvement. No model needed.
#include <cmath>

#include <gtest/gtest.h>

#include "nightlora/eval/nightly_gate.h"

namespace {

std::vector<nl::ExampleLoss> losses(const std::vector<double>& per_token, int64_t tokens = 10) {
  std::vector<nl::ExampleLoss> v;
  for (double l : per_token) v.push_back({l * static_cast<double>(tokens), tokens});
  return v;
}

nl::GateInput clear_improvement(int64_t n = 8) {
  nl::GateInput in;
  in.train_steps = 20;
  std::vector<double> cand, cur;
  for (int64_t i = 0; i < n; ++i) {
    cur.push_back(3.0 + 0.1 * static_cast<double>(i % 3));
    cand.push_back(1.0 + 0.1 * static_cast<double>(i % 4));
  }
  in.candidate = losses(cand);
  in.current = losses(cur);
  return in;
}

TEST(NightlyGate, PublishesAClearImprovement) {
  const nl::PublishDecision d = nl::nightly_gate(clear_improvement(), {});
  EXPECT_TRUE(d.publish) << d.reason;
  EXPECT_LT(d.candidate_loss, d.current_loss);
  ASSERT_TRUE(d.loss_comparison.has_value());
  EXPECT_GT(d.loss_comparison->ci_low, 0.0);
}

TEST(NightlyGate, TiesAndWorseKeepCurrent) {
  nl::GateInput tie = clear_improvement();
  tie.candidate = tie.current;
  nl::PublishDecision d = nl::nightly_gate(tie, {});
  EXPECT_FALSE(d.publish);
  EXPECT_NE(d.reason.find("not better by more than chance"), std::string::npos) << d.reason;
  nl::GateInput worse = clear_improvement();
  std::swap(worse.candidate, worse.current);
  EXPECT_FALSE(nl::nightly_gate(worse, {}).publish);
}

TEST(NightlyGate, OneLuckyItemIsNotEnough) {
  // Better on one item of eight, equal elsewhere: the interval reaches 0.
  nl::GateInput in = clear_improvement();
  in.candidate = in.current;
  in.candidate[0].loss_sum -= 5.0;
  const nl::PublishDecision d = nl::nightly_gate(in, {});
  EXPECT_FALSE(d.publish) << d.reason;
}

TEST(NightlyGate, EveryConditionIsAReason) {
  nl::GateInput in = clear_improvement();
  in.diverged = true;
  EXPECT_NE(nl::nightly_gate(in, {}).reason.find("diverged"), std::string::npos);
  in = clear_improvement();
  in.candidate_weights_finite = false;
  EXPECT_NE(nl::nightly_gate(in, {}).reason.find("non-finite"), std::string::npos);
  in = clear_improvement();
  in.train_steps = 0;
  EXPECT_NE(nl::nightly_gate(in, {}).reason.find("0 step(s)"), std::string::npos);
  in = clear_improvement(1);
  const nl::PublishDecision small = nl::nightly_gate(in, {});
  EXPECT_FALSE(small.publish);
  EXPECT_NE(small.reason.find("1 item(s), fewer than the 5"), std::string::npos) << small.reason;
  in = clear_improvement();
  in.candidate[3].loss_sum = NAN;
  EXPECT_NE(nl::nightly_gate(in, {}).reason.find("not finite"), std::string::npos);
  in = clear_improvement();
  in.metric = nl::TaskMetric{"accuracy", 0.5, 0.75};
  const nl::PublishDecision m = nl::nightly_gate(in, {});
  EXPECT_FALSE(m.publish);
  EXPECT_NE(m.reason.find("lower accuracy"), std::string::npos) << m.reason;
  in.metric = nl::TaskMetric{"accuracy", 0.75, 0.75};
  EXPECT_TRUE(nl::nightly_gate(in, {}).publish);
}

TEST(NightlyGate, MarginIsRequired) {
  nl::GateOptions o;
  o.min_improvement = 5.0;  // more than the 2 nats/token the candidate gains
  EXPECT_FALSE(nl::nightly_gate(clear_improvement(), o).publish);
  EXPECT_NE(nl::nightly_gate_rule(o).find("above 5 nats/token"), std::string::npos) << nl::nightly_gate_rule(o);
}

}  // namespace

namespace {

TEST(PairedUnits, TooFewUnitsAreSaidToMeanNothing) {
  const nl::PairedComparison one = nl::paired_bootstrap({0.0}, {1.0}, 100, 1);
  EXPECT_EQ(one.ci_low, one.ci_high);  // the meaningless zero-width interval of issue 37
  EXPECT_NE(nl::paired_units_warning(one, "user").find("only 1 user,"), std::string::npos)
      << nl::paired_units_warning(one, "user");
  const nl::PairedComparison five = nl::paired_bootstrap({0, 0, 0, 1, 0}, {1, 1, 0, 1, 1}, 100, 1);
  EXPECT_EQ(nl::paired_units_warning(five, "item"), "");
}

}  // namespace
