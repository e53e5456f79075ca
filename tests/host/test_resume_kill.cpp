// Resume is exact: a training run killed with SIGKILL at 20 random moments (while loading,
// inside steps, while a checkpoint is being written) and restarted each time ends with an
// adapter and optimizer state byte-identical to a run that was never interrupted.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <random>
#include <thread>

#include "resume_util.h"

namespace {

namespace fs = std::filesystem;
using namespace resume_test;

// Starts the CLI with `args`, stdout+stderr to `log`; returns its pid. The shell execs the CLI,
// so the pid is the trainer's own and SIGKILL hits it directly.
pid_t spawn_cli(const std::string& args, const fs::path& log) {
  const std::string cmd = "exec " + nltest::shq(NL_CLI_PATH) + " " + args + " >" + nltest::shq(log.string()) + " 2>&1";
  pid_t pid = fork();
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  return pid;
}

TEST(ResumeKill, TwentySigkillsThenResumeIsByteIdenticalToAnUninterruptedRun) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", model);
  nltest::TempDir td;
  const int iters = 16;
  // f32: with auto, each session before the first checkpoint would spend the kills' window
  // calibrating (the resume of a calibrated run: PrecisionCli.ResumeReusesTheStoredPlan...).
  const std::string ckpt_opts = "--save-every 1 --save-every-sec 0 --keep 2 --precision f32";

  const auto t0 = std::chrono::steady_clock::now();
  auto ref = nltest::run_cli(train_args(model, td / "ref", iters, ckpt_opts));
  ASSERT_EQ(ref.rc, 0) << ref.out << ref.err;
  const double ref_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  // Each session is killed somewhere in its first ~quarter of a full run's time (so several
  // sessions are needed and most kills land mid-run; every other one only once a checkpoint
  // exists); the seed is printed so a failure can be replayed.
  const unsigned seed = std::random_device{}();
  std::printf("kill delays seed %u, uninterrupted run %.2f s\n", seed, ref_s);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> delay(0.0, std::max(0.05, ref_s / 4));
  const fs::path out = td / "killed";
  int resumed_sessions = 0;
  for (int k = 0; k < 20; ++k) {
    const fs::path log = td / ("session" + std::to_string(k) + ".txt");
    pid_t pid = spawn_cli(train_args(model, out, iters, ckpt_opts), log);
    ASSERT_GT(pid, 0);
    int status = 0;
    bool exited = false;
    // Every other session is killed only once the folder holds a checkpoint (at most 30 s
    // of waiting), so resume is exercised however slow a loaded machine makes the start.
    if (k % 2 == 1)
      for (int w = 0; w < 3000 && checkpoints(out).empty(); ++w) {
        if (waitpid(pid, &status, WNOHANG) == pid) {
          exited = true;
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    if (!exited) {
      std::this_thread::sleep_for(std::chrono::duration<double>(delay(rng)));
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
    }
    const std::string text = nltest::read_text(log);
    if (text.find("resuming from") != std::string::npos) ++resumed_sessions;
    EXPECT_EQ(text.find("Error"), std::string::npos) << text;
    EXPECT_EQ(text.find("error"), std::string::npos) << text;
  }
  auto fin = nltest::run_cli(train_args(model, out, iters, ckpt_opts));
  ASSERT_EQ(fin.rc, 0) << fin.out << fin.err;
  std::printf("%d of 20 killed sessions had resumed from a checkpoint\n", resumed_sessions);
  EXPECT_GE(resumed_sessions, 1) << "no kill landed after the first checkpoint: the test did not exercise resume";

  for (const char* f : {"adapter_model.safetensors", "adapter.gguf", "adapter_config.json"})
    EXPECT_TRUE(nltest::read_text(td / "ref" / f) == nltest::read_text(out / f)) << f << " differs";
  auto ref_ck = checkpoints(td / "ref"), out_ck = checkpoints(out);
  ASSERT_FALSE(ref_ck.empty());
  ASSERT_FALSE(out_ck.empty());
  EXPECT_EQ(ref_ck.back().filename(), out_ck.back().filename());
  const std::string a = state_bytes(ref_ck.back()), b = state_bytes(out_ck.back());
  EXPECT_GT(a.size(), 1000u);
  EXPECT_TRUE(a == b) << "final optimizer/adapter state differs";

  // The log covers every step exactly once, in order, whatever was cut by the kills.
  std::istringstream log(nltest::read_text(out / "log.jsonl"));
  std::string line;
  int64_t expect = 1;
  while (std::getline(log, line)) {
    auto row = nlohmann::json::parse(line);
    if (row["type"] == "train") {
      EXPECT_EQ(row["step"].get<int64_t>(), expect++) << line;
    }
  }
  EXPECT_EQ(expect, iters + 1);
}

}  // namespace
