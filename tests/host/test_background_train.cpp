// `nightlora train --background` with a fake /sys power-supply tree: off the charger the job
// checkpoints and waits, and continues when power returns; the control file pauses and
// resumes it. Waiting never changes the result: the adapter equals a plain run's, byte for byte.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>

#include "resume_util.h"

namespace {

namespace fs = std::filesystem;
using namespace resume_test;

void set_power(const fs::path& sys, bool online) {
  fs::create_directories(sys / "class/power_supply/ac");
  nltest::write_text(sys / "class/power_supply/ac/type", "Mains\n");
  nltest::write_text(sys / "class/power_supply/ac/online", online ? "1\n" : "0\n");
}

// Polls `file` until it contains `text` (the job is waiting); false after ~60 s.
bool wait_for_text(const fs::path& file, const std::string& text) {
  for (int i = 0; i < 1200; ++i) {
    std::error_code ec;
    if (fs::exists(file, ec) && nltest::read_text(file).find(text) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

TEST(BackgroundTrain, WaitsOffChargerWithACheckpointAndContinuesOnPower) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", model);
  nltest::TempDir td;
  const fs::path sys = td / "sys";
  set_power(sys, false);
  auto plain = nltest::run_cli(train_args(model, td / "plain", 4));
  ASSERT_EQ(plain.rc, 0) << plain.err;

  const fs::path out = td / "bg";
  const std::string args = train_args(model, out, 4, "--background --require-power --recheck-sec 0.1 --sysfs-root " +
                                                         nltest::shq(sys.string()));
  auto job = std::async(std::launch::async, [&] { return nltest::run_cli(args); });
  if (!wait_for_text(out / "log.jsonl", "\"type\":\"wait\"")) {
    set_power(sys, true);
    auto r = job.get();
    FAIL() << "the job never waited:\n" << r.out << r.err;
  }
  EXPECT_EQ(checkpoints(out).size(), 1u);  // written when the wait began
  EXPECT_EQ(nltest::read_text(out / "log.jsonl").find("\"type\":\"train\""), std::string::npos);
  set_power(sys, true);
  auto r = job.get();
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("waiting for external power"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("step 4/4"), std::string::npos) << r.out;
  EXPECT_TRUE(nltest::read_text(out / "adapter_model.safetensors") ==
              nltest::read_text(td / "plain" / "adapter_model.safetensors"));
  // No energy counter under the fake /sys: said so, not invented.
  EXPECT_NE(nltest::read_text(out / "log.jsonl").find("\"energy_j\":\"unavailable\""), std::string::npos);
}

TEST(BackgroundTrain, ControlFilePausesAndResumesAtAStepBoundary) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", model);
  nltest::TempDir td;
  const fs::path sys = td / "sys";
  set_power(sys, true);
  const fs::path out = td / "bg";
  fs::create_directories(out);
  nltest::write_text(out / "control", "pause\n");
  const std::string args =
      train_args(model, out, 3, "--background --recheck-sec 0.1 --sysfs-root " + nltest::shq(sys.string()));
  auto job = std::async(std::launch::async, [&] { return nltest::run_cli(args); });
  if (!wait_for_text(out / "log.jsonl", "\"type\":\"wait\"")) {
    nltest::write_text(out / "control", "resume\n");
    auto r = job.get();
    FAIL() << "the job did not pause:\n" << r.out << r.err;
  }
  EXPECT_NE(nltest::read_text(out / "log.jsonl").find("pause"), std::string::npos);
  nltest::write_text(out / "control", "resume\n");
  auto r = job.get();
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("step 3/3"), std::string::npos) << r.out;
}

TEST(BackgroundTrain, DutyCyclePacingLogsEachDecisionAndDoesNotChangeTheResult) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", model);
  nltest::TempDir td;
  nltest::write_text(td / "temp", "41500\n");  // millidegrees, as sysfs writes them
  auto plain = nltest::run_cli(train_args(model, td / "plain", 3));
  ASSERT_EQ(plain.rc, 0) << plain.err;
  const fs::path out = td / "paced";
  auto r = nltest::run_cli(train_args(model, out, 3, "--duty 0.5 --temp-source file:" + (td / "temp").string()));
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  std::istringstream log(nltest::read_text(out / "log.jsonl"));
  std::string line;
  int paced = 0;
  while (std::getline(log, line)) {
    auto row = nlohmann::json::parse(line);
    if (row["type"] != "pace") continue;
    ++paced;
    EXPECT_EQ(row["temp_c"].get<double>(), 41.5) << line;
    EXPECT_GT(row["idle_s"].get<double>(), 0.0) << line;
    EXPECT_NEAR(row["idle_s"].get<double>(), row["step_s"].get<double>(), 1e-9) << line;  // duty 0.5
    EXPECT_EQ(row["throttled"], false) << line;
  }
  EXPECT_EQ(paced, 2);  // after every step but the last
  EXPECT_TRUE(nltest::read_text(out / "adapter_model.safetensors") ==
              nltest::read_text(td / "plain" / "adapter_model.safetensors"));
  auto bad = nltest::run_cli(train_args(model, td / "bad", 3, "--duty 0.5 --temp-source gpu"));
  EXPECT_NE(bad.rc, 0);
  EXPECT_NE(bad.err.find("--temp-source gpu"), std::string::npos) << bad.err;
}

}  // namespace
