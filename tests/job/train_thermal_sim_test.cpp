// Thermal pacing end to end through `nightlora train --temp-source sim:...`: real training
// steps of a tiny model run on the simulated device (live_thermal_sim.h). Without pacing the
// device throttles and the job really slows down; with --temp-ceiling its temperature stays
// under the ceiling after the first overshoot (if there is one: the thermostat knows a step's
// heating only once it has measured one) and the run completes with the same adapter.
#include <gtest/gtest.h>

#include "../report/tiny_run.h"
#include "nightlora/job/live_thermal_sim.h"
#include "nightlora/util/error.h"

namespace {

namespace fs = std::filesystem;
using namespace tinyrun;

// A 1 s time constant, 0.05 s of work per step, starting at 50 °C: throttling (at 60 °C) within
// about a second of unpaced work.
const std::string kSim = "--temp-source sim:c=0.125,step=0.05,start=50 --pace-poll-sec 0.02";

TEST(LiveThermalSim, ParsesKeysAndRejectsNonsense) {
  nl::LiveSimSpec s = nl::parse_sim_source("sim:c=0.5,step=0.1,throttle-at=70,start=30");
  EXPECT_DOUBLE_EQ(s.device.c_j_per_c, 0.5);
  EXPECT_DOUBLE_EQ(*s.step_work_s, 0.1);
  EXPECT_DOUBLE_EQ(s.device.throttle_at_c, 70);
  EXPECT_DOUBLE_EQ(s.device.throttle_release_c, 67);  // follows throttle-at
  EXPECT_FALSE(nl::parse_sim_source("sim").step_work_s.has_value());
  EXPECT_TRUE(nl::is_sim_source("sim:r=2"));
  EXPECT_FALSE(nl::is_sim_source("simple"));
  for (const char* bad : {"sim:x=1", "sim:c", "sim:c=abc", "sim:step=0", "sim:r=-1", "sim:throttle-speed=2"}) {
    try {
      nl::parse_sim_source(bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const nl::Error& e) {
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    }
  }
}

TEST(LiveThermalSim, ThrottledStepsAreSleptOutAndTheDeviceFollowsTheWallClock) {
  nl::LiveSimSpec s = nl::parse_sim_source("sim:c=0.125,step=0.05,start=59.9");
  double now = 100, slept = 0;
  nl::LiveThermalSim sim(s, [&] { return now; }, [&](double d) { slept += d, now += d; });
  now += 0.01;  // a real step of 10 ms
  nl::LiveSimStep a = sim.step_finished(0.01);
  EXPECT_GT(a.throttled_s, 0);              // it crossed 60 °C during the step
  EXPECT_GT(a.device_s, 0.05);              // and took longer than its work
  EXPECT_NEAR(a.extra_s, a.device_s - 0.01, 1e-9);
  EXPECT_NEAR(slept, a.extra_s, 1e-12);     // the job waited it out
  now += 5;                                 // 5 s of other work: the device idles and cools
  EXPECT_LT(*sim.read().celsius, 40.0);
  EXPECT_NEAR(sim.device().now_s(), now - 100, 1e-9);
}

TEST(TrainThermalSim, WithoutPacingTheDeviceThrottlesAndTheStepsSlowDown) {
  nltest::TempDir td;
  const fs::path model = make_tiny_model(td.path);
  const fs::path out = td / "run";
  auto r = nltest::run_cli(tiny_train_args(model, out, 30, kSim));
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("thermal: simulated device"), std::string::npos) << r.out;
  auto sim = log_rows(out, "sim");
  ASSERT_EQ(sim.size(), 30u);
  int throttled = 0, slept = 0;
  double max_temp = 0;
  for (const auto& row : sim) {
    max_temp = std::max(max_temp, row["temp_c"].get<double>());
    if (row["throttled_s"].get<double>() > 0) {
      ++throttled;
      EXPECT_GT(row["device_s"].get<double>(), row["work_s"].get<double>()) << row;
      if (row["extra_s"].get<double>() > 0) ++slept;
    }
  }
  std::printf("unpaced: %d of 30 steps throttled, max %.2f C\n", throttled, max_temp);
  EXPECT_GE(throttled, 3);
  EXPECT_GE(slept, 1) << "no throttled step was slowed down";
  // End-of-step temperatures: the device throttles at 60 °C mid-step and cools on reduced
  // power, so steps end a little below it; well above the paced run's ceiling (56 °C).
  EXPECT_GT(max_temp, 57.0);
  EXPECT_TRUE(log_rows(out, "pace").empty());  // nothing paced
}

TEST(TrainThermalSim, WithACeilingTheTemperatureStaysUnderItAndTheRunCompletes) {
  nltest::TempDir td;
  const fs::path model = make_tiny_model(td.path);
  const double ceiling = 56;
  auto plain = nltest::run_cli(tiny_train_args(model, td / "plain", 30));
  ASSERT_EQ(plain.rc, 0) << plain.err;
  const fs::path out = td / "paced";
  auto r = nltest::run_cli(tiny_train_args(model, out, 30, kSim + " --temp-ceiling 56"));
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("step 30/30"), std::string::npos) << r.out;
  auto sim = log_rows(out, "sim");
  ASSERT_EQ(sim.size(), 30u);
  int first_over = -1, over_after = 0, throttled = 0;
  double max_temp = 0;
  for (size_t i = 0; i < sim.size(); ++i) {
    const double t = sim[i]["temp_c"].get<double>();
    max_temp = std::max(max_temp, t);
    if (sim[i]["throttled_s"].get<double>() > 0) ++throttled;
    if (first_over < 0) {
      if (t > ceiling) first_over = static_cast<int>(i);
      continue;
    }
    if (t > ceiling) ++over_after;
  }
  std::printf("paced: max %.2f C; first above the ceiling at step %d (-1: never), %d steps above it after that\n",
              max_temp, first_over >= 0 ? first_over + 1 : -1, over_after);
  EXPECT_EQ(over_after, 0) << "above the ceiling after the first overshoot";
  EXPECT_EQ(throttled, 0) << "the device throttled although it was held under its throttling point";
  // Pacing inserted idle time, and said why.
  double idle = 0;
  for (const auto& row : log_rows(out, "pace")) idle += row["idle_s"].get<double>();
  EXPECT_GT(idle, 0.0);
  // Pacing only waits: the adapter is the one an unpaced run makes.
  EXPECT_TRUE(nltest::read_text(out / "adapter_model.safetensors") ==
              nltest::read_text(td / "plain" / "adapter_model.safetensors"));
}

TEST(TrainThermalSim, BadSimSpecFailsBeforeAnythingIsWritten) {
  nltest::TempDir td;
  const fs::path model = make_tiny_model(td.path);
  auto r = nltest::run_cli(tiny_train_args(model, td / "run", 2, "--temp-source sim:heat=3"));
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.err.find("unknown key 'heat'"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(td / "run"));
  auto g = nltest::run_cli(tiny_train_args(model, td / "run", 2, "--temp-source gpu"));
  EXPECT_NE(g.rc, 0);
  EXPECT_NE(g.err.find("--temp-source gpu"), std::string::npos) << g.err;
}

}  // namespace
