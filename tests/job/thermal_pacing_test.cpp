// Thermal pacing on the simulated device: the RC model itself, throttling detection from
// throughput, the ceiling and duty-cycle controllers, and the sensorless fallback.
#include <cmath>

#include "nightlora/job/pacer.h"
#include "nightlora/job/pacing.h"
#include "nightlora/job/thermal_sim.h"
#include "nightlora/job/thermal_simulation.h"
#include "nightlora/job/throttle_detector.h"
#include "nightlora/util/error.h"
#include "test_util.h"

namespace {

nl::SimOptions run_opts(int64_t steps, const std::string& name = "paced") {
  nl::SimOptions o;
  o.steps = steps;
  o.name = name;
  return o;
}

TEST(ThermalSim, FollowsTheRcSolution) {
  nl::ThermalSimConfig c;
  c.throttle_at_c = 1000;  // no throttling: pure RC
  c.throttle_release_c = 999;
  nl::SimulatedDevice d(c);
  EXPECT_DOUBLE_EQ(d.temperature_c(), c.ambient_c);
  for (int i = 0; i < 30; ++i) d.run_step();
  // Constant power P for t seconds from ambient: T = Ta + P·R·(1 − exp(−t/RC)).
  double tau = c.r_c_per_w * c.c_j_per_c;
  double want = c.ambient_c + c.step_power_w * c.r_c_per_w * (1 - std::exp(-30 * c.step_work_s / tau));
  EXPECT_NEAR(d.temperature_c(), want, 1e-9);
  EXPECT_NEAR(d.now_s(), 30 * c.step_work_s, 1e-9);
  EXPECT_NEAR(d.energy_j(), 30 * c.step_work_s * c.step_power_w, 1e-9);
  // Idle cools it towards ambient + idle power × R.
  double t0 = d.temperature_c();
  d.idle(10 * tau);
  EXPECT_LT(d.temperature_c(), t0);
  EXPECT_NEAR(d.temperature_c(), c.ambient_c + c.idle_power_w * c.r_c_per_w, 1e-3);
}

TEST(ThermalSim, ThrottlesAboveTheThresholdAndSlowsSteps) {
  nl::ThermalSimConfig c;  // steady state under load 73 C > throttle at 60 C
  nl::SimulatedDevice d(c);
  nl::SimStepOutcome o;
  int steps = 0;
  while (!d.throttled() && steps < 1000) o = d.run_step(), ++steps;
  ASSERT_TRUE(d.throttled()) << "never reached " << c.throttle_at_c << " C";
  // It throttled inside the step; at throttled power (3 W: 49 C steady state) it already cools.
  EXPECT_GT(d.temperature_c(), c.throttle_release_c);
  o = d.run_step();
  EXPECT_NEAR(o.seconds, c.step_work_s / c.throttle_speed, 1e-9) << "a fully throttled step runs at half speed";
  EXPECT_NEAR(o.throttled_s, o.seconds, 1e-9);
  // It releases only after cooling to the release temperature (hysteresis).
  while (d.temperature_c() > c.throttle_release_c + 0.5) d.idle(0.1);
  EXPECT_TRUE(d.throttled());
  d.idle(60);
  EXPECT_FALSE(d.throttled());
}

TEST(ThermalSim, IsDeterministic) {
  nl::PacingConfig p;
  p.ceiling_c = 52;
  nl::SimRun a = nl::simulate_thermal({}, p, run_opts(300)), b = nl::simulate_thermal({}, p, run_opts(300));
  ASSERT_EQ(a.steps.size(), b.steps.size());
  for (size_t i = 0; i < a.steps.size(); ++i) {
    EXPECT_EQ(a.steps[i].temp_end_c, b.steps[i].temp_end_c);
    EXPECT_EQ(a.steps[i].idle_s, b.steps[i].idle_s);
  }
}

TEST(ThermalSim, RejectsNonsense) {
  nl::ThermalSimConfig c;
  c.r_c_per_w = 0;
  EXPECT_THROW(nl::SimulatedDevice{c}, nl::Error);
  c = {};
  c.throttle_speed = 1.5;
  EXPECT_THROW(nl::SimulatedDevice{c}, nl::Error);
  nl::PacingConfig p;
  p.ceiling_c = 28;  // the idle device settles at 25 + 0.5·8 = 29 C: unreachable
  EXPECT_THROW(nl::simulate_thermal({}, p, run_opts(10)), nl::Error);
  p = {};
  p.duty = 0;
  EXPECT_THROW(nl::simulate_thermal({}, p, run_opts(10)), nl::Error);
}

TEST(ThrottleDetector, FlagsSustainedSlowdownOnly) {
  nl::ThrottleDetector d;  // skip 1, baseline of 5, window 3, threshold 1.15
  d.observe(3.0);          // warm-up: ignored
  for (int i = 0; i < 5; ++i) d.observe(1.0);
  ASSERT_TRUE(d.has_baseline());
  EXPECT_DOUBLE_EQ(d.baseline(), 1.0);
  d.observe(2.0);  // one slow step (another process, a page fault storm) is not throttling
  EXPECT_FALSE(d.throttled());
  d.observe(1.9);
  d.observe(2.1);
  EXPECT_TRUE(d.throttled());
  EXPECT_NEAR(d.slowdown(), 2.0, 1e-12);
  for (int i = 0; i < 3; ++i) d.observe(1.02);
  EXPECT_FALSE(d.throttled());
}

TEST(ThrottleDetector, BaselineTakenWhileHotIsLoweredLater) {
  nl::ThrottleDetector d;
  d.observe(2.0);
  for (int i = 0; i < 5; ++i) d.observe(2.0);  // started on a hot, throttled device
  EXPECT_DOUBLE_EQ(d.baseline(), 2.0);
  for (int i = 0; i < 3; ++i) d.observe(1.0);  // it cooled: the true speed shows
  EXPECT_DOUBLE_EQ(d.baseline(), 1.0);
  for (int i = 0; i < 3; ++i) d.observe(2.0);
  EXPECT_TRUE(d.throttled());
}

// The default device: steady state 73 C, throttles at 60 C. The paced run holds 55 C.
TEST(ThermalPacing, WithoutPacingTheDeviceThrottles) {
  nl::SimOptions o = run_opts(600, "unpaced");
  o.report_ceiling_c = 55;
  nl::SimRun r = nl::simulate_thermal({}, nl::PacingConfig{}, o);
  const auto& s = r.summary;
  EXPECT_GT(s.throttled_s, 0.3 * s.active_s) << "the unpaced device should spend much of its time throttled";
  EXPECT_GT(s.max_temp_c, 59.5);  // end-of-step temperatures: throttling caps them near 60 C
  EXPECT_GT(s.mean_step_s, 1.2) << "throttled steps take longer";
  ASSERT_TRUE(s.first_over_ceiling_step);
  EXPECT_GT(s.steps_over_ceiling, 300);
  EXPECT_EQ(s.idle_s, 0);
}

TEST(ThermalPacing, CeilingHoldsAndTheRunCompletes) {
  nl::PacingConfig p;
  p.ceiling_c = 55;
  nl::SimRun r = nl::simulate_thermal({}, p, run_opts(600));
  const auto& s = r.summary;
  ASSERT_EQ(s.steps, 600);
  // Starting at ambient, the first step's rise is measured before the device gets near the
  // ceiling, so there is no first overshoot at all here: every step ends under 55 C.
  EXPECT_FALSE(s.first_over_ceiling_step) << "first overshoot at step " << *s.first_over_ceiling_step;
  EXPECT_LE(s.max_temp_c, 55.0);
  EXPECT_EQ(s.throttled_s, 0) << "held under the throttling point, the device never throttles";
  // It idles only as much as needed: the temperature rides close under the ceiling, and the
  // duty cycle is close to the most that 55 C allows, (55−25)/8 W = 3.75 W on average,
  // i.e. (3.75 − 0.5) / (6 − 0.5) = 0.59 of the time running.
  EXPECT_GT(s.max_temp_c, 54.0);
  EXPECT_GT(s.duty, 0.55);
  // Every paced step says why it idled.
  bool cooled = false;
  for (const auto& st : r.steps)
    if (st.idle_s > 0) cooled |= st.reason.find("cooling") != std::string::npos;
  EXPECT_TRUE(cooled);
}

TEST(ThermalPacing, StartingAboveTheCeilingOvershootsOnlyAtTheFirstStep) {
  nl::ThermalSimConfig c;
  c.start_c = 58;  // a job started on a hot phone
  nl::PacingConfig p;
  p.ceiling_c = 55;
  nl::SimRun r = nl::simulate_thermal(c, p, run_opts(400));
  const auto& s = r.summary;
  ASSERT_TRUE(s.first_over_ceiling_step);
  EXPECT_EQ(*s.first_over_ceiling_step, 1) << "the first step runs before anything is known";
  EXPECT_EQ(s.steps_over_ceiling, 1);
  EXPECT_LE(s.max_temp_after_first_over_c, 55.0) << "after the first overshoot (step 1) the ceiling holds";
  EXPECT_GT(r.steps[0].idle_s, 0) << "it cools down right after the first step";
}

TEST(ThermalPacing, VaryingStepsStayUnderTheCeilingAfterTheFirstOvershoot) {
  // Steps of varying length (sequence lengths differ): a longer step heats more than the
  // estimate from shorter ones; the safety factor and the max over recent rises absorb it.
  nl::ThermalSimConfig c;
  nl::SimulatedDevice dev(c);
  struct Sensor : nl::TemperatureSource {
    nl::SimulatedDevice* d;
    nl::TempReading read() override { return {d->temperature_c(), "sim", ""}; }
    std::string describe() const override { return "sim"; }
  } sensor;
  sensor.d = &dev;
  nl::PacingConfig p;
  p.ceiling_c = 50;
  nl::Pacer pacer(p, &sensor, [&](double s) { dev.idle(s); });
  std::optional<int> first_over;
  double max_after = 0, max_all = 0;
  for (int i = 1; i <= 500; ++i) {
    double scale = 0.6 + 0.4 * ((i * 7919) % 11) / 10.0;  // 0.6 .. 1.0, deterministic
    pacer.before_step();
    nl::SimStepOutcome o = dev.run_step(scale);
    pacer.after_step(o.seconds, scale);
    max_all = std::max(max_all, o.temp_end_c);
    if (o.temp_end_c > 50 && !first_over) first_over = i;
    else if (first_over) max_after = std::max(max_after, o.temp_end_c);
  }
  // With these steps there is no overshoot at all; were there one, only the first may be.
  EXPECT_FALSE(first_over) << "first overshoot at step " << *first_over;
  EXPECT_LE(first_over ? max_after : max_all, 50.0);
  EXPECT_GT(max_all, 49.0) << "the ceiling was not approached: the test would prove nothing";
  EXPECT_GT(pacer.total_idle_s(), 0);
}

TEST(ThermalPacing, DutyCycleModeHoldsItsDuty) {
  for (double duty : {0.25, 0.5, 0.8}) {
    nl::PacingConfig p;
    p.duty = duty;
    nl::SimRun r = nl::simulate_thermal({}, p, run_opts(200));
    EXPECT_NEAR(r.summary.duty, duty, 1e-9) << "duty " << duty;
    for (const auto& s : r.steps) EXPECT_NEAR(s.idle_s, s.step_s * (1 - duty) / duty, 1e-9);
  }
  // At duty 0.5 the device settles at 25 + (0.5·6 + 0.5·0.5)·8 = 51 C and never throttles.
  nl::PacingConfig p;
  p.duty = 0.5;
  nl::SimRun r = nl::simulate_thermal({}, p, run_opts(1500));
  EXPECT_EQ(r.summary.throttled_s, 0);
  EXPECT_NEAR(r.steps.back().temp_end_c, 51.0, 0.5);
}

TEST(ThermalPacing, DutyAndCeilingTogetherTakeTheStricter) {
  nl::PacingConfig p;
  p.duty = 0.9;
  p.ceiling_c = 50;
  nl::SimRun r = nl::simulate_thermal({}, p, run_opts(500));
  EXPECT_LE(r.summary.max_temp_c, 50.0);
  EXPECT_LT(r.summary.duty, 0.9);
  for (const auto& s : r.steps) EXPECT_GE(s.idle_s, s.step_s * (0.1 / 0.9) - 1e-9);
}

TEST(ThermalPacing, WithoutASensorItPacesOnThroughputAndThrottlesLess) {
  nl::SimRun unpaced = nl::simulate_thermal({}, nl::PacingConfig{}, run_opts(1000, "unpaced"));
  nl::PacingConfig p;
  p.ceiling_c = 55;  // cannot be held without a sensor: it backs off on throttling instead
  nl::SimOptions o = run_opts(1000);
  o.with_sensor = false;
  nl::SimRun blind = nl::simulate_thermal({}, p, o);
  EXPECT_LT(blind.summary.throttled_s, 0.5 * unpaced.summary.throttled_s);
  bool said = false;
  for (const auto& s : blind.steps) said |= s.reason.find("throttling detected") != std::string::npos;
  EXPECT_TRUE(said);
  EXPECT_NE(blind.steps.back().reason.find("no temperature reading"), std::string::npos) << blind.steps.back().reason;
}

TEST(ThermalPacing, PacerGivesUpWaitingWhenTheDeviceCannotCool) {
  // A sensor stuck above the ceiling (a hot room): the pacer waits max_wait_s, then runs.
  struct Stuck : nl::TemperatureSource {
    nl::TempReading read() override { return {70.0, "stuck", ""}; }
    std::string describe() const override { return "stuck"; }
  } stuck;
  double slept = 0;
  nl::PacingConfig p;
  p.ceiling_c = 60;
  p.max_wait_s = 30;
  p.poll_s = 1;
  nl::Pacer pacer(p, &stuck, [&](double s) { slept += s; });
  pacer.before_step();
  nl::PacingDecision d = pacer.after_step(1.0);
  EXPECT_DOUBLE_EQ(slept, 30);
  EXPECT_DOUBLE_EQ(d.idle_s, 30);
  EXPECT_NE(d.reason.find("gave up"), std::string::npos) << d.reason;
}

TEST(ThermalPacing, InterruptEndsACoolDown) {
  struct Hot : nl::TemperatureSource {
    nl::TempReading read() override { return {70.0, "hot", ""}; }
    std::string describe() const override { return "hot"; }
  } hot;
  int polls = 0;
  nl::PacingConfig p;
  p.ceiling_c = 60;
  nl::Pacer pacer(p, &hot, [](double) {}, [&] { return ++polls > 3; });
  pacer.before_step();
  nl::PacingDecision d = pacer.after_step(1.0);
  EXPECT_DOUBLE_EQ(d.idle_s, 3 * p.poll_s);
  EXPECT_NE(d.reason.find("interrupted"), std::string::npos) << d.reason;
}

}  // namespace
