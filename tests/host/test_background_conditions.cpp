// `nightlora train --background` end to end on a tiny synthetic model: SIGUSR1/SIGUSR2 pause
// and resume at a step boundary; a time window played out on a fake clock (the job waits
// outside it and continues in the next night's); a battery minimum on a fake power-supply
// tree; wall-time, step and energy budgets. Every interrupted run ends with the adapter an
// uninterrupted run makes.
#include <gtest/gtest.h>

#include <atomic>
#include <future>

#include "../report/tiny_run.h"

namespace {

namespace fs = std::filesystem;
using namespace tinyrun;

// Steps of at least 0.1 s (a simulated device slower than this machine; far from throttling),
// so that a signal or a budget lands in the middle of a run.
const std::string kSlowSteps = "--temp-source sim:step=0.1";

std::string adapter(const fs::path& out) { return nltest::read_text(out / "adapter_model.safetensors"); }

// Complete train rows in OUT/log.jsonl (the job may be writing the last line right now).
size_t train_rows(const fs::path& out) {
  std::error_code ec;
  if (!fs::exists(out / "log.jsonl", ec)) return 0;
  const std::string text = nltest::read_text(out / "log.jsonl");
  size_t n = 0, begin = 0, end;
  while ((end = text.find('\n', begin)) != std::string::npos) {
    if (text.substr(begin, end - begin).find("\"type\":\"train\"") != std::string::npos) ++n;
    begin = end + 1;
  }
  return n;
}

// The step of the newest checkpoint in OUT/checkpoints (its name holds it), or -1.
int64_t newest_checkpoint_step(const fs::path& out) {
  int64_t best = -1;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(out / "checkpoints", ec)) {
    const std::string name = e.path().filename().string();
    if (e.path().extension() != ".nlck") continue;
    const size_t digits = name.find_first_of("0123456789");
    if (digits != std::string::npos) best = std::max<int64_t>(best, std::stoll(name.substr(digits)));
  }
  return best;
}

TEST(BackgroundSignals, Sigusr1PausesAtAStepBoundaryAndSigusr2Resumes) {
  nltest::TempDir td;
  const fs::path model = make_tiny_model(td.path);
  auto plain = nltest::run_cli(tiny_train_args(model, td / "plain", 12));
  ASSERT_EQ(plain.rc, 0) << plain.err;

  const fs::path out = td / "bg";
  pid_t pid = spawn_cli(tiny_train_args(model, out, 12, "--background --recheck-sec 0.05 " + kSlowSteps), td / "bg.txt");
  ASSERT_GT(pid, 0);
  ASSERT_TRUE(wait_for_text(out / "log.jsonl", "\"step\":2,")) << nltest::read_text(td / "bg.txt");
  kill(pid, SIGUSR1);
  if (!wait_for_text(out / "log.jsonl", "paused by SIGUSR1")) {
    kill(pid, SIGKILL);
    wait_exit(pid);
    FAIL() << "the job did not pause:\n" << nltest::read_text(td / "bg.txt");
  }
  // Paused after finishing the step it was in: the wait row names that step, a checkpoint
  // holds it, and no step runs while paused.
  const size_t at_pause = train_rows(out);
  auto waits = log_rows(out, "wait");
  ASSERT_EQ(waits.size(), 1u);
  EXPECT_EQ(waits[0]["step"].get<size_t>(), at_pause);
  EXPECT_LT(at_pause, 12u);
  EXPECT_EQ(newest_checkpoint_step(out), static_cast<int64_t>(at_pause));  // written when the pause began
  std::this_thread::sleep_for(std::chrono::milliseconds(600));  // several step lengths
  EXPECT_EQ(train_rows(out), at_pause) << "a step ran while paused";
  kill(pid, SIGUSR2);
  ASSERT_EQ(wait_exit(pid), 0) << nltest::read_text(td / "bg.txt");
  const std::string text = nltest::read_text(td / "bg.txt");
  EXPECT_NE(text.find("paused by SIGUSR1"), std::string::npos) << text;
  EXPECT_NE(text.find("step 12/12"), std::string::npos) << text;
  EXPECT_EQ(train_rows(out), 12u);
  EXPECT_TRUE(adapter(out) == adapter(td / "plain"));
}

TEST(BackgroundWindow, WaitsOutsideItsWindowAndContinuesInTheNextOne) {
  nltest::TempDir td;
  const fs::path model = make_tiny_model(td.path);
  auto plain = nltest::run_cli(tiny_train_args(model, td / "plain", 8));
  ASSERT_EQ(plain.rc, 0) << plain.err;
  // The fake clock starts at 06:59 and moves a minute per step: the window 07:00-07:03 opens
  // after a minute's wait, holds three steps, and the rest waits for the next day's window.
  const fs::path out = td / "bg";
  auto r = nltest::run_cli(
      tiny_train_args(model, out, 8, "--background --window 07:00-07:03 --fake-clock 06:59,60 --recheck-sec 3600"));
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  auto waits = log_rows(out, "wait");
  ASSERT_EQ(waits.size(), 3u) << r.out;
  const int64_t expect_steps[] = {0, 3, 6};
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(waits[i]["step"].get<int64_t>(), expect_steps[i]);
    EXPECT_NE(waits[i]["reason"].get<std::string>().find("outside the time window 07:00-07:03"), std::string::npos)
        << waits[i];
  }
  EXPECT_NE(waits[1]["reason"].get<std::string>().find("opens in 23h57m"), std::string::npos) << waits[1];
  EXPECT_EQ(log_rows(out, "train").size(), 8u);
  EXPECT_TRUE(adapter(out) == adapter(td / "plain"));

  auto bad = nltest::run_cli(tiny_train_args(model, td / "bad", 2, "--fake-clock 06:59,60"));
  EXPECT_NE(bad.rc, 0);
  EXPECT_NE(bad.err.find("--background"), std::string::npos) << bad.err;
}

TEST(BackgroundBattery, WaitsBelowTheMinimumAndContinuesWhenCharged) {
  nltest::TempDir td;
  const fs::path model = make_tiny_model(td.path);
  const fs::path bat = td / "sys/class/power_supply/BAT0";
  fs::create_directories(bat);
  nltest::write_text(bat / "type", "Battery\n");
  nltest::write_text(bat / "status", "Discharging\n");
  nltest::write_text(bat / "capacity", "20\n");
  const fs::path out = td / "bg";
  const std::string args = tiny_train_args(model, out, 4, "--background --min-battery 50 --recheck-sec 0.05 --sysfs-root " +
                                                         nltest::shq((td / "sys").string()));
  auto job = std::async(std::launch::async, [&] { return nltest::run_cli(args); });
  if (!wait_for_text(out / "log.jsonl", "battery at 20%, below the required 50%")) {
    nltest::write_text(bat / "capacity", "80\n");
    auto r = job.get();
    FAIL() << "the job did not wait for the battery:\n" << r.out << r.err;
  }
  EXPECT_EQ(train_rows(out), 0u);
  nltest::write_text(bat / "status", "Charging\n");
  nltest::write_text(bat / "capacity", "80\n");
  auto r = job.get();
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("step 4/4"), std::string::npos) << r.out;
}

TEST(BackgroundBudgets, WallStepAndEnergyBudgetsStopWithACheckpointAndTheRunContinues) {
  nltest::TempDir td;
  const fs::path model = make_tiny_model(td.path);
  auto plain = nltest::run_cli(tiny_train_args(model, td / "plain", 10));
  ASSERT_EQ(plain.rc, 0) << plain.err;

  // Wall time: steps of >= 0.1 s against a 0.35 s budget.
  const fs::path out = td / "wall";
  auto w = nltest::run_cli(tiny_train_args(model, out, 10, "--background --max-wall 0.35 " + kSlowSteps));
  ASSERT_EQ(w.rc, 75) << w.out << w.err;  // stopped, resumable
  EXPECT_NE(w.out.find("wall-time budget"), std::string::npos) << w.out;
  const size_t done = train_rows(out);
  EXPECT_GE(done, 1u);
  EXPECT_LT(done, 10u);
  // Steps (per session): the same folder continues, 3 more steps.
  auto s = nltest::run_cli(tiny_train_args(model, out, 10, "--max-steps 3"));
  ASSERT_EQ(s.rc, 75) << s.out << s.err;
  EXPECT_NE(s.out.find("--max-steps reached"), std::string::npos) << s.out;
  EXPECT_EQ(train_rows(out), done + 3);

  // Energy: a fake RAPL counter that a thread advances by 1 J every 20 ms.
  const fs::path sys = td / "sys", rapl = sys / "class/powercap/intel-rapl:0";
  fs::create_directories(rapl);
  nltest::write_text(rapl / "name", "package-0\n");
  nltest::write_text(rapl / "max_energy_range_uj", "262143328850\n");
  nltest::write_text(rapl / "energy_uj", "1000000\n");
  std::atomic<bool> stop{false};
  std::thread counter([&] {
    for (int64_t uj = 1000000; !stop; uj += 1000000) {
      nltest::write_text(rapl / "energy_uj.new", std::to_string(uj) + "\n");
      fs::rename(rapl / "energy_uj.new", rapl / "energy_uj");
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  // At 50 W and >= 0.1 s per step (5 J), 4 J last one step at most (how many depends on how
  // long loading takes, which the counter also charges).
  auto e = nltest::run_cli(tiny_train_args(model, out, 10, "--background --max-energy 4 --sysfs-root " +
                                                          nltest::shq(sys.string()) + " " + kSlowSteps));
  stop = true;
  counter.join();
  ASSERT_EQ(e.rc, 75) << e.out << e.err;  // stopped, resumable
  EXPECT_NE(e.out.find("energy budget of 4 J"), std::string::npos) << e.out;
  EXPECT_LT(train_rows(out), 10u);

  // An energy budget where nothing measures energy is refused, not guessed.
  auto no = nltest::run_cli(tiny_train_args(model, td / "none", 10, "--background --max-energy 3 --sysfs-root " +
                                                                   nltest::shq((td / "empty").string())));
  EXPECT_NE(no.rc, 0);
  EXPECT_NE(no.err.find("energy cannot be measured"), std::string::npos) << no.err;

  // Without budgets the run finishes, equal to the uninterrupted one.
  auto fin = nltest::run_cli(tiny_train_args(model, out, 10));
  ASSERT_EQ(fin.rc, 0) << fin.out << fin.err;
  EXPECT_EQ(train_rows(out), 10u);
  EXPECT_TRUE(adapter(out) == adapter(td / "plain"));
  // The report tells the sessions apart.
  auto rep = nltest::run_cli("report " + nltest::shq(out.string()));
  ASSERT_EQ(rep.rc, 0) << rep.err;
  const std::string html = nltest::read_text(out / "report.html");
  EXPECT_NE(html.find("4 sessions"), std::string::npos);
  EXPECT_NE(html.find("stopped: energy budget"), std::string::npos);
}

}  // namespace
