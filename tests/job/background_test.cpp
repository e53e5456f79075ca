// Background mode: power supply and battery from fake sysfs trees, time windows on a manual
// clock, pause/resume by signal and control file, budgets, the gate that combines them, and
// idle CPU/I/O priority.
#include <signal.h>
#include <sched.h>

#include <filesystem>
#include <limits>
#include <thread>
#include <vector>

#include "nightlora/job/background_gate.h"
#include "nightlora/job/budget.h"
#include "nightlora/job/clock.h"
#include "nightlora/job/pause_control.h"
#include "nightlora/job/power_supply.h"
#include "nightlora/job/priority.h"
#include "nightlora/job/time_window.h"
#include "nightlora/util/error.h"
#include "test_util.h"

namespace {

namespace fs = std::filesystem;
using nltest::TempDir;
using nltest::write_text;

// A fake /sys/class/power_supply: a phone-like charger and battery.
struct FakePower {
  fs::path root;
  explicit FakePower(const fs::path& r) : root(r) {
    fs::create_directories(root / "class/power_supply/ac");
    fs::create_directories(root / "class/power_supply/battery");
    write_text(root / "class/power_supply/ac/type", "Mains\n");
    write_text(root / "class/power_supply/battery/type", "Battery\n");
    set(false, 80);
  }
  void set(bool plugged, int percent) {
    write_text(root / "class/power_supply/ac/online", plugged ? "1\n" : "0\n");
    write_text(root / "class/power_supply/battery/status", plugged ? "Charging\n" : "Discharging\n");
    write_text(root / "class/power_supply/battery/capacity", std::to_string(percent) + "\n");
  }
};

TEST(PowerSupply, ChargerAndBattery) {
  TempDir t;
  FakePower p(t.path);
  nl::PowerSupplyStatus s = nl::read_power_supply(t.path.string());
  ASSERT_TRUE(s.external_power);
  EXPECT_FALSE(*s.external_power);
  EXPECT_TRUE(s.has_battery);
  EXPECT_DOUBLE_EQ(*s.battery_percent, 80);
  p.set(true, 81);
  s = nl::read_power_supply(t.path.string());
  EXPECT_TRUE(*s.external_power);
  EXPECT_EQ(s.detail, "ac (Mains) online");
}

TEST(PowerSupply, BatteryStatusAloneAndUsbCharging) {
  TempDir t;
  fs::path b = t / "class/power_supply/BAT0";
  fs::create_directories(b);
  write_text(b / "type", "Battery");
  write_text(b / "status", "Full");
  // No capacity file: the level comes from energy_now / energy_full.
  write_text(b / "energy_now", "30000000");
  write_text(b / "energy_full", "40000000");
  nl::PowerSupplyStatus s = nl::read_power_supply(t.path.string());
  EXPECT_TRUE(*s.external_power);
  EXPECT_DOUBLE_EQ(*s.battery_percent, 75);
  write_text(b / "status", "Not charging");
  s = nl::read_power_supply(t.path.string());
  EXPECT_FALSE(s.external_power) << "cannot be told: " << s.detail;
  fs::create_directories(t / "class/power_supply/usb");
  write_text(t / "class/power_supply/usb/type", "USB");
  write_text(t / "class/power_supply/usb/online", "1");
  s = nl::read_power_supply(t.path.string());
  EXPECT_TRUE(*s.external_power);
}

TEST(PowerSupply, NoSupplyMeansMainsAndPeripheralBatteriesAreIgnored) {
  TempDir t;
  nl::PowerSupplyStatus s = nl::read_power_supply(t.path.string());
  EXPECT_TRUE(*s.external_power);
  EXPECT_FALSE(s.has_battery);
  EXPECT_NE(s.detail.find("assuming"), std::string::npos) << "the inference is stated: " << s.detail;
  fs::path m = t / "class/power_supply/hidpp_battery_0";
  fs::create_directories(m);
  write_text(m / "type", "Battery");
  write_text(m / "scope", "Device");
  write_text(m / "status", "Discharging");
  write_text(m / "capacity", "5");
  s = nl::read_power_supply(t.path.string());
  EXPECT_TRUE(*s.external_power) << "a wireless mouse's battery is not the machine's";
  EXPECT_FALSE(s.battery_percent);
}

TEST(TimeWindow, ParsesAndCrossesMidnight) {
  auto w = nl::TimeWindow::parse("23:00-07:00");
  EXPECT_EQ(w.text(), "23:00-07:00");
  EXPECT_TRUE(w.contains(23 * 3600));
  EXPECT_TRUE(w.contains(2 * 3600));
  EXPECT_TRUE(w.contains(7 * 3600 - 1));
  EXPECT_FALSE(w.contains(7 * 3600));
  EXPECT_FALSE(w.contains(12 * 3600));
  EXPECT_DOUBLE_EQ(w.seconds_until_open(22 * 3600), 3600);
  EXPECT_DOUBLE_EQ(w.seconds_until_open(8 * 3600), 15 * 3600);
  EXPECT_DOUBLE_EQ(w.seconds_until_open(1 * 3600), 0);
  EXPECT_DOUBLE_EQ(w.seconds_until_close(1 * 3600), 6 * 3600);
  auto d = nl::TimeWindow::parse("1:30-05:00");
  EXPECT_TRUE(d.contains(1.5 * 3600));
  EXPECT_FALSE(d.contains(23 * 3600));
  EXPECT_DOUBLE_EQ(d.seconds_until_open(23 * 3600), 2.5 * 3600);
  EXPECT_TRUE(nl::TimeWindow::parse("18:00-24:00").contains(23.99 * 3600));
  EXPECT_EQ(nl::TimeWindow::parse(" 9:05 -\t17:30 ").text(), "09:05-17:30");
  for (const char* bad : {"", "23-07", "25:00-07:00", "23:00-07:60", "10:00-10:00", "23:00 07:00", "ab:cd-ef:gh",
                          "123:00-07:00", "23:000-07:00", "23:0-07:00", "23:00-07:00x", "23:00--07:00", "+1:00-07:00"})
    EXPECT_THROW(nl::TimeWindow::parse(bad), nl::Error) << bad;
  EXPECT_EQ(nl::format_duration(3 * 3600 + 5 * 60), "3h05m");
  EXPECT_EQ(nl::format_duration(42), "42s");
  // Sub-second and short budgets keep their fraction.
  EXPECT_EQ(nl::format_duration(0.5), "0.5s");
  EXPECT_EQ(nl::format_duration(0.25), "0.25s");
  EXPECT_EQ(nl::format_duration(0.0012), "0.0012s");
  EXPECT_EQ(nl::format_duration(2.0), "2s");
  EXPECT_EQ(nl::format_duration(9.5), "9.5s");
  EXPECT_EQ(nl::format_duration(9.999), "10s");
  EXPECT_EQ(nl::format_duration(59.6), "1m00s");
  EXPECT_EQ(nl::format_duration(0), "0s");
  EXPECT_EQ(nl::format_duration(-3), "0s");
  EXPECT_EQ(nl::format_duration(std::numeric_limits<double>::infinity()), "unlimited");
}

TEST(PauseControl, SignalsPauseAndResume) {
  nl::PauseControl pc("", true);
  EXPECT_FALSE(pc.paused());
  ::raise(SIGUSR1);
  EXPECT_TRUE(pc.paused());
  EXPECT_NE(pc.why().find("SIGUSR1"), std::string::npos);
  EXPECT_TRUE(pc.paused()) << "stays paused until resumed";
  ::raise(SIGUSR2);
  EXPECT_FALSE(pc.paused());
  // Only one signal-handling control at a time.
  EXPECT_THROW(nl::PauseControl("", true), nl::Error);
}

TEST(PauseControl, SignalHandlersAreRestored) {
  struct sigaction before {};
  sigaction(SIGUSR1, nullptr, &before);
  { nl::PauseControl pc("", true); }
  struct sigaction after {};
  sigaction(SIGUSR1, nullptr, &after);
  EXPECT_EQ(before.sa_handler, after.sa_handler);
}

TEST(PauseControl, ControlFileRequestsAreEvents) {
  TempDir t;
  std::string f = (t / "control").string();
  nl::PauseControl pc(f, false);
  EXPECT_FALSE(pc.paused()) << "no file: running";
  write_text(f, "pause\n");
  EXPECT_TRUE(pc.paused());
  EXPECT_NE(pc.why().find("control file"), std::string::npos);
  pc.request_resume("test");
  EXPECT_FALSE(pc.paused()) << "an unchanged file does not undo a later request";
  write_text(f, "resume");
  EXPECT_FALSE(pc.paused());
  write_text(f, "PAUSE  ");
  EXPECT_TRUE(pc.paused());
  write_text(f, "stop please");
  EXPECT_TRUE(pc.paused()) << "unknown words are ignored";
  EXPECT_NE(pc.warning().find("expected"), std::string::npos);
  write_text(f, "run");
  EXPECT_FALSE(pc.paused());
  // A file saying "pause" when the job starts pauses it.
  write_text(f, "pause");
  nl::PauseControl fresh(f, false);
  EXPECT_TRUE(fresh.paused());
}

TEST(Budgets, StepsWallAndEnergy) {
  nl::Budgets b;
  b.steps = 10;
  b.wall_s = 3600;
  EXPECT_FALSE(nl::exhausted_budget(b, {100, 9, std::nullopt}));
  EXPECT_NE(nl::exhausted_budget(b, {100, 10, std::nullopt})->find("step budget"), std::string::npos);
  EXPECT_NE(nl::exhausted_budget(b, {3600, 1, std::nullopt})->find("wall-time"), std::string::npos);
  b.energy_j = 1000;
  EXPECT_THROW(nl::check_budgets_enforceable(b, false, "no RAPL"), nl::Error) << "never stop on an invented figure";
  EXPECT_NO_THROW(nl::check_budgets_enforceable(b, true));
  EXPECT_NE(nl::exhausted_budget(b, {1, 1, 1000.0})->find("energy"), std::string::npos);
  EXPECT_FALSE(nl::exhausted_budget(b, {1, 1, 999.0}));
}

// The whole gate: a job that must run on the charger, inside 23:00-07:00, with battery >= 50%.
TEST(BackgroundGate, WaitsOffChargerAndOutsideTheWindowAndResumes) {
  TempDir t;
  FakePower power(t.path);
  power.set(true, 90);
  nl::ManualClock clock(22 * 3600);  // 22:00: an hour before the window
  nl::BackgroundConditions c;
  c.require_external_power = true;
  c.min_battery_percent = 50;
  c.window = nl::TimeWindow::parse("23:00-07:00");
  c.sysfs_root = t.path.string();
  c.recheck_s = 60;
  nl::BackgroundGate gate(c, clock, nullptr);

  nl::GateDecision d = gate.check({});
  EXPECT_EQ(d.verdict, nl::GateVerdict::Wait);
  EXPECT_NE(d.reason.find("opens in 1h00m"), std::string::npos) << d.reason;
  EXPECT_DOUBLE_EQ(d.wait_s, 60) << "long waits are cut into re-checks";

  // Waiting advances the manual clock to the window's opening.
  int waits_begun = 0;
  d = gate.wait_until_runnable([] { return nl::BudgetUse{}; }, [&](const nl::GateDecision&) { ++waits_begun; });
  EXPECT_EQ(d.verdict, nl::GateVerdict::Run) << d.reason;
  EXPECT_EQ(waits_begun, 1) << "the job checkpoints once when a wait begins";
  EXPECT_NEAR(clock.seconds_of_day(), 23 * 3600, 1.0);

  // Unplugged: wait; the reason names the power source.
  power.set(false, 90);
  d = gate.check({});
  EXPECT_EQ(d.verdict, nl::GateVerdict::Wait);
  EXPECT_NE(d.reason.find("waiting for external power"), std::string::npos) << d.reason;
  // Plugged in again, but the battery is low: still waiting.
  power.set(true, 30);
  d = gate.check({});
  EXPECT_EQ(d.verdict, nl::GateVerdict::Wait);
  EXPECT_NE(d.reason.find("battery at 30%"), std::string::npos) << d.reason;
  power.set(true, 55);
  d = gate.check({});
  EXPECT_EQ(d.verdict, nl::GateVerdict::Run) << d.reason;
  EXPECT_NE(d.reason.find("inside 23:00-07:00"), std::string::npos) << d.reason;

  // 07:00: the window closes and the job waits until 23:00 the next day.
  clock.advance(8 * 3600);
  d = gate.check({});
  EXPECT_EQ(d.verdict, nl::GateVerdict::Wait);
  EXPECT_NE(d.reason.find("opens in 16h00m"), std::string::npos) << d.reason;
}

TEST(BackgroundGate, ResumesWhenThePowerComesBackDuringAWait) {
  TempDir t;
  FakePower power(t.path);  // on battery
  // A clock whose sleeps plug the charger in after ten minutes of waiting.
  struct PluggingClock : nl::ManualClock {
    FakePower* p;
    double waited = 0;
    void sleep(double s) override {
      advance(s);
      waited += s;
      if (waited >= 600) p->set(true, 80);
    }
  } clock;
  clock.p = &power;
  nl::BackgroundConditions c;
  c.require_external_power = true;
  c.sysfs_root = t.path.string();
  nl::BackgroundGate gate(c, clock, nullptr);
  std::vector<std::string> log;
  nl::GateDecision d = gate.wait_until_runnable({}, [&](const nl::GateDecision& w) { log.push_back(w.reason); });
  EXPECT_EQ(d.verdict, nl::GateVerdict::Run);
  EXPECT_DOUBLE_EQ(clock.waited, 600);
  ASSERT_EQ(log.size(), 1u);
  EXPECT_NE(log[0].find("on battery"), std::string::npos) << log[0];
}

TEST(BackgroundGate, PauseAtAStepBoundaryAndBudgetsStop) {
  TempDir t;
  nl::ManualClock clock;
  nl::PauseControl pc((t / "control").string(), true);
  nl::BackgroundConditions c;
  c.sysfs_root = t.path.string();
  c.budgets.steps = 5;
  nl::BackgroundGate gate(c, clock, &pc);

  // A loop of steps; a SIGUSR1 arriving "during" step 2 takes effect at the next boundary.
  int64_t steps = 0;
  std::vector<std::string> events;
  while (true) {
    nl::GateDecision d = gate.wait_until_runnable(
        [&] { return nl::BudgetUse{clock.now_s(), steps, std::nullopt}; },
        [&](const nl::GateDecision& w) {
          events.push_back("wait after step " + std::to_string(steps) + ": " + w.reason);
          write_text(t / "control", "resume");  // the user resumes while the job waits
        });
    if (d.verdict == nl::GateVerdict::Stop) {
      events.push_back("stop: " + d.reason);
      break;
    }
    ++steps;           // the step runs
    clock.advance(1);
    if (steps == 2) ::raise(SIGUSR1);
  }
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0], "wait after step 2: paused by SIGUSR1 (pause)");
  EXPECT_EQ(events[1], "stop: step budget of 5 steps reached");
  EXPECT_EQ(steps, 5);
}

TEST(BackgroundGate, StopRequestEndsAWait) {
  nl::ManualClock clock(12 * 3600);
  nl::BackgroundConditions c;
  c.window = nl::TimeWindow::parse("23:00-07:00");
  nl::BackgroundGate gate(c, clock, nullptr);
  int asked = 0;
  nl::GateDecision d = gate.wait_until_runnable({}, {}, [&] { return ++asked > 3; });
  EXPECT_EQ(d.verdict, nl::GateVerdict::Stop);
  EXPECT_DOUBLE_EQ(clock.now_s(), 3 * 60) << "three re-checks of 60 s";
}

// Priorities are per thread on Linux: set them in a fresh thread so the test runner keeps its own.
TEST(Priority, IdleCpuAndIoPriority) {
  nl::PriorityResult cpu, io;
  std::string desc;
  int policy = -1;
  std::thread th([&] {
    cpu = nl::set_idle_cpu_priority();
    io = nl::set_idle_io_priority();
    policy = sched_getscheduler(0);
    desc = nl::describe_priority();
  });
  th.join();
  ASSERT_TRUE(cpu.ok) << cpu.detail;
  if (cpu.detail == "SCHED_IDLE") EXPECT_EQ(policy, SCHED_IDLE);
  else EXPECT_NE(desc.find("nice 19"), std::string::npos) << desc;
  if (io.ok) EXPECT_NE(desc.find("io idle"), std::string::npos) << desc;
  else std::printf("idle I/O priority not available here: %s\n", io.detail.c_str());
  EXPECT_NE(sched_getscheduler(0), SCHED_IDLE) << "the calling thread is not affected";
}

}  // namespace
