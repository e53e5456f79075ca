// `nightlora nightly` on a user's own JSONL (the generic task), end to end on stories260K: a
// user whose stories name a character the base model never saw. The job publishes only what
// is really better, says why otherwise, recovers from failing runs, stops cleanly on signals
// and keeps its folder bounded.
#include <signal.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <set>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "nightlora/eval/nightly.h"
#include "nightly_test_helpers.h"
#include "test_util.h"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

const char* kName = "Zorbo";

// n stories (numbered from `first`, one hour apart) about the user's dragon, as the app would
// write them: {"text": ..., "timestamp": Unix seconds}.
void write_stories(const fs::path& file, int first, int n) {
  static const char* kDoings[] = {"liked to fly over the hills", "found a shiny red ball", "played with a little cat",
                                  "ate a big cake",               "sang a happy song",      "went to the park with mom",
                                  "saw a big tree",               "helped a small bird"};
  std::string s;
  for (int i = first; i < first + n; ++i) {
    const std::string story = std::string("Once upon a time, there was a little dragon named ") + kName + ". " + kName +
                              " " + kDoings[i % 8] + ". " + kName + " was very happy.";
    s += json({{"text", story}, {"timestamp", 1800000000 + 3600 * i}}).dump() + "\n";
  }
  fs::create_directories(file.parent_path());
  nltest::write_text(file, s);
}

std::string generic_nightly_args(const fs::path& model, const fs::path& data, const fs::path& out, const std::string& extra,
                         const std::string& train_extra = "") {
  const std::string lr = extra.find("--lr") == std::string::npos ? " --lr 1e-2" : "";
  return "nightly --model " + nltest::shq(model.string()) + " --user-data " + nltest::shq(data.string()) + " --out " +
         nltest::shq(out.string()) + " --threads 2 --batch 4 --seq-len 96 --no-report" + lr + " " + extra +
         // Idle priority would starve the training child on a busy test machine.
         " -- --normal-priority " + train_extra;
}

json read_json(const fs::path& p) { return json::parse(nltest::read_text(p)); }
json generic_decision(const fs::path& out, const std::string& run) { return read_json(out / "runs" / run / "decision.json"); }
std::string generic_current_target(const fs::path& out) {
  std::error_code ec;
  return fs::read_symlink(out / "current", ec).string();
}

std::string greedy_story(const fs::path& model, const std::string& adapter_flag) {
  nltest::CmdResult g = nltest::run_cli("generate --model " + nltest::shq(model.string()) + " " + adapter_flag +
                                        " --prompt 'Once upon a time, there was a little dragon named' --temp 0 -n 24 -t 2");
  EXPECT_EQ(g.rc, 0) << g.err;
  return g.out;
}

// Night 1 on 30 stories: trains 30 steps and (the tests check) publishes.
void first_night(const fs::path& model, const fs::path& data, const fs::path& out) {
  write_stories(data / "day1.jsonl", 0, 30);
  nltest::CmdResult r1 = nltest::run_cli(generic_nightly_args(model, data, out, "--iters 30"));
  ASSERT_EQ(r1.rc, 0) << r1.out << r1.err;
}

TEST(NightlyGeneric, NightOnePublishesTheUsersCharacterNightTwoContinuesFromIt) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", model);
  nltest::TempDir tmp;
  const fs::path data = tmp / "app", out = tmp / "job";
  ASSERT_NO_FATAL_FAILURE(first_night(model, data, out));
  const json d1 = generic_decision(out, "0001");
  ASSERT_EQ(d1["outcome"], "published") << d1.dump(1);
  EXPECT_EQ(d1["heldout_items"], 6);  // 20% of 30
  EXPECT_LT(d1["candidate"]["loss"].get<double>(), d1["current"]["loss"].get<double>());
  EXPECT_GT(d1["loss_improvement"]["ci_low"].get<double>(), 0.0);
  EXPECT_EQ(generic_current_target(out), "adapters/0001");
  EXPECT_NE(greedy_story(model, "--adapter " + nltest::shq((out / "current").string())).find(kName), std::string::npos);
  EXPECT_EQ(greedy_story(model, "").find(kName), std::string::npos) << "the base model already knows the name";
  const std::string summary = nltest::read_text(out / "runs/0001/summary.md");
  EXPECT_NE(summary.find("Decision: published"), std::string::npos) << summary;
  EXPECT_NE(summary.find("Storage: "), std::string::npos) << summary;
  // Sealed: no checkpoints left, one copy of the adapter (the published files are hard links).
  EXPECT_FALSE(fs::exists(out / "runs/0001/train/checkpoints"));
  EXPECT_FALSE(fs::exists(out / "runs/0001/train/adapter_model.safetensors"));
  struct stat a {}, b {};
  ASSERT_EQ(::stat((out / "adapters/0001/adapter_model.safetensors").c_str(), &a), 0);
  ASSERT_EQ(::stat((out / "runs/0001/candidate/adapter_model.safetensors").c_str(), &b), 0);
  EXPECT_EQ(a.st_ino, b.st_ino);

  // Night 2: more data; training continues from the published adapter.
  write_stories(data / "day2.jsonl", 30, 10);
  nltest::CmdResult r2 = nltest::run_cli(generic_nightly_args(model, data, out, "--iters 10"));
  ASSERT_EQ(r2.rc, 0) << r2.out << r2.err;
  const json run2 = read_json(out / "runs/0002/run.json");
  EXPECT_EQ(run2["start_adapter"], (out / "adapters/0001").string());
  EXPECT_EQ(run2["data"]["items"], 40);
  EXPECT_EQ(run2["data"]["new_items"], 10);
  EXPECT_NE(r2.out.find("10 new since the last run"), std::string::npos) << r2.out;
  const json d2 = generic_decision(out, "0002");
  EXPECT_EQ(d2["current_before"], (out / "adapters/0001").string());
  EXPECT_EQ(d2["outcome"] == "published", generic_current_target(out) == "adapters/0002") << d2.dump(1);
  EXPECT_FALSE(fs::exists(out / "runs/0001/candidate"));  // an older sealed run keeps no adapter copy
  EXPECT_TRUE(fs::exists(out / "adapters/0001/adapter_model.safetensors"));

  nltest::CmdResult st = nltest::run_cli("nightly status " + nltest::shq(out.string()));
  ASSERT_EQ(st.rc, 0) << st.err;
  EXPECT_NE(st.out.find("run 0002: "), std::string::npos) << st.out;
  EXPECT_NE(st.out.find("next: a fresh run"), std::string::npos) << st.out;
  EXPECT_NE(st.out.find("storage: "), std::string::npos) << st.out;
  nltest::CmdResult sj = nltest::run_cli("nightly status --json " + nltest::shq(out.string()));
  ASSERT_EQ(sj.rc, 0) << sj.err;
  const json s = json::parse(sj.out);
  EXPECT_EQ(s["runs"].size(), 2u);
  EXPECT_EQ(s["storage"]["checkpoint_bytes"], 0);
}

TEST(NightlyGeneric, NeverPublishesWorseAndSaysWhy) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", model);
  nltest::TempDir tmp;
  const fs::path data = tmp / "app", out = tmp / "job";
  ASSERT_NO_FATAL_FAILURE(first_night(model, data, out));
  ASSERT_EQ(generic_current_target(out), "adapters/0001");
  struct Case {
    std::string args, run, why;
  };
  const Case cases[] = {
      {"--iters 10 --lr 1e6", "0002", "finite"},                   // diverging: non-finite weights or losses, or train gave up
      {"--iters 10 --budget-sec 0.000001", "0003", "0 step(s)"},   // stopped before its first step
      {"--iters 10 --holdout 1", "0004", "held-out set has 1 item"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.args);
    nltest::CmdResult n = nltest::run_cli(generic_nightly_args(model, data, out, c.args));
    ASSERT_EQ(n.rc, 0) << n.out << n.err;
    const json d = generic_decision(out, c.run);
    EXPECT_EQ(d["outcome"], "kept-current") << d.dump(1);
    const std::string reason = d["reason"];
    const bool diverged_reason = reason.find("diverged") != std::string::npos;
    EXPECT_TRUE(reason.find(c.why) != std::string::npos || (c.why == "finite" && diverged_reason)) << reason;
    EXPECT_FALSE(d["rule"].get<std::string>().empty());
    EXPECT_EQ(generic_current_target(out), "adapters/0001");
    EXPECT_FALSE(fs::exists(out / "adapters" / c.run));
    EXPECT_NE(n.out.find("decision: kept-current"), std::string::npos) << n.out;
  }
}

TEST(NightlyGeneric, FailingRunIsAbandonedSettingsChangeAndResetStartFresh) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", model);
  nltest::TempDir tmp;
  const fs::path data = tmp / "app", out = tmp / "job";
  write_stories(data / "stories.jsonl", 0, 20);
  // One step a night: every run stays unfinished (stopped, resumable: 75).
  const std::string train_extra = "--max-steps 1";
  auto night = [&](const std::string& extra) { return nltest::run_cli(generic_nightly_args(model, data, out, "--iters 20 --max-attempts 2 " + extra, train_extra)); };
  nltest::CmdResult r = night("");
  ASSERT_EQ(r.rc, 75) << r.out << r.err;
  EXPECT_NE(r.out.find("the same command continues run 0001"), std::string::npos) << r.out;
  // The run's own data breaks (as a bad generated file once did): every retry fails.
  nltest::write_text(out / "runs/0001/train.jsonl", "{broken\n");
  for (int attempt = 1; attempt <= 2; ++attempt) {
    r = night("");
    EXPECT_NE(r.rc, 0);
    EXPECT_NE(r.rc, 75);
    EXPECT_NE(r.err.find("training failed"), std::string::npos) << r.err;
    EXPECT_EQ(read_json(out / "runs/0001/failures.json")["count"], attempt);
  }
  nltest::CmdResult st = nltest::run_cli("nightly status " + nltest::shq(out.string()));
  EXPECT_NE(st.out.find("continues run 0001 (2 failure(s)"), std::string::npos) << st.out;
  r = night("");
  ASSERT_EQ(r.rc, 75) << r.out << r.err;
  const json a1 = read_json(out / "runs/0001/abandoned.json");
  EXPECT_NE(a1["reason"].get<std::string>().find("failed 2 time(s)"), std::string::npos) << a1.dump();
  EXPECT_FALSE(fs::exists(out / "runs/0001/train/checkpoints"));
  EXPECT_TRUE(fs::exists(out / "runs/0002/train/checkpoints"));  // a fresh run trained
  // Changed settings: the unfinished run is abandoned, naming what changed.
  r = night("--lr 2e-2");
  ASSERT_EQ(r.rc, 75) << r.out << r.err;
  const std::string why2 = read_json(out / "runs/0002/abandoned.json")["reason"];
  EXPECT_NE(why2.find("lr 0.01 -> 0.02"), std::string::npos) << why2;
  EXPECT_NE(r.out.find("run 0002 abandoned"), std::string::npos) << r.out;
  // The same settings again continue; --reset abandons on purpose.
  r = night("--lr 2e-2");
  ASSERT_EQ(r.rc, 75) << r.out << r.err;
  EXPECT_NE(r.out.find("continuing run"), std::string::npos) << r.out;
  r = night("--lr 2e-2 --reset");
  ASSERT_EQ(r.rc, 75) << r.out << r.err;
  EXPECT_NE(read_json(out / "runs/0003/abandoned.json")["reason"].get<std::string>().find("--reset"), std::string::npos);
  EXPECT_TRUE(fs::exists(out / "runs/0004/run.json"));
  EXPECT_FALSE(fs::exists(out / "current"));
}

// Starts `nightly ARGS` in the background, waits until its run is training (`ready`: a
// checkpoint exists and the job's output shows the child), sends `sig` to the job alone (it
// must pass the stop on to its training child) and returns its exit code and output.
struct Stopped {
  int rc = -1;
  std::string log;
};
Stopped stop_while_training(const std::string& args, const fs::path& out, const fs::path& tmp, int sig) {
  const std::string tag = std::to_string(sig);
  const fs::path log = tmp / ("job" + tag + ".log"), pid = tmp / ("pid" + tag), rc = tmp / ("rc" + tag);
  // sh runs nightly in the background, keeps its PID, waits for it and keeps $?.
  const std::string script = nltest::shq(NL_CLI_PATH) + " " + args + " > " + nltest::shq(log.string()) +
                             " 2>&1 & echo $! > " + nltest::shq(pid.string()) + "; wait $!; echo $? > " +
                             nltest::shq(rc.string());
  nltest::run_cmd("sh -c " + nltest::shq(script) + " > /dev/null 2>&1 &");
  Stopped s;
  bool training = false;
  for (int i = 0; i < 600 && !training; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    training = fs::exists(log) && nltest::read_text(log).find("training in a child process") != std::string::npos;
  }
  EXPECT_TRUE(training && nightly_test::wait_for_checkpoint(out)) << nltest::read_text(log);
  ::kill(static_cast<pid_t>(std::stol(nltest::read_text(pid))), sig);
  for (int i = 0; i < 600 && !fs::exists(rc); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  s.rc = std::stoi(nltest::read_text(rc));
  s.log = nltest::read_text(log);
  return s;
}

TEST(NightlyGeneric, SigintSavesSaysSoAndTheNextRunContinuesExactly) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", model);
  nltest::TempDir tmp;
  const fs::path data = tmp / "app";
  write_stories(data / "stories.jsonl", 0, 30);
  const std::string args = "--iters 40 --save-every 2";
  nltest::CmdResult ref = nltest::run_cli(generic_nightly_args(model, data, tmp / "ref", args));
  ASSERT_EQ(ref.rc, 0) << ref.out << ref.err;

  const fs::path out = tmp / "job";
  const Stopped s = stop_while_training(generic_nightly_args(model, data, out, args), out, tmp.path, SIGINT);
  ASSERT_EQ(s.rc, 130) << s.log;
  EXPECT_NE(s.log.find("stopped by SIGINT: training saved at step"), std::string::npos) << s.log;
  EXPECT_NE(s.log.find("the same command continues run 0001"), std::string::npos) << s.log;
  EXPECT_FALSE(fs::exists(out / "runs/0001/decision.json"));

  nltest::CmdResult again = nltest::run_cli(generic_nightly_args(model, data, out, args));
  ASSERT_EQ(again.rc, 0) << again.out << again.err;
  EXPECT_NE(again.out.find("continuing run"), std::string::npos) << again.out;
  EXPECT_EQ(nltest::read_text(out / "runs/0001/candidate/adapter_model.safetensors"),
            nltest::read_text(tmp / "ref/runs/0001/candidate/adapter_model.safetensors"));
  EXPECT_EQ(generic_decision(out, "0001")["outcome"], generic_decision(tmp / "ref", "0001")["outcome"]);
}

TEST(NightlyGeneric, SigtermAndSighupStopWithTheirExitCodes) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", model);
  nltest::TempDir tmp;
  const fs::path data = tmp / "app", out = tmp / "job";
  write_stories(data / "stories.jsonl", 0, 30);
  const std::string args = generic_nightly_args(model, data, out, "--iters 60 --save-every 2");
  for (const auto& [sig, name] : {std::pair{SIGTERM, "SIGTERM"}, std::pair{SIGHUP, "SIGHUP"}}) {
    SCOPED_TRACE(name);
    const Stopped s = stop_while_training(args, out, tmp.path, sig);
    EXPECT_EQ(s.rc, 128 + sig) << s.log;
    EXPECT_NE(s.log.find(std::string("stopped by ") + name + ": "), std::string::npos) << s.log;
  }
  nltest::CmdResult again = nltest::run_cli(args);
  ASSERT_EQ(again.rc, 0) << again.out << again.err;
  EXPECT_EQ(generic_decision(out, "0001")["train_steps"], 60);
}

// Bytes of the regular files under `dir` whose path contains `part`, hard links once.
uint64_t unique_bytes(const fs::path& dir, const std::string& part) {
  std::set<ino_t> seen;
  uint64_t n = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file() || e.path().string().find(part) == std::string::npos) continue;
    struct stat st {};
    if (::stat(e.path().c_str(), &st) == 0 && seen.insert(st.st_ino).second) n += static_cast<uint64_t>(st.st_size);
  }
  return n;
}

TEST(NightlyGeneric, ThirtyNightsStayWithinTheStorageBound) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", model);
  nltest::TempDir tmp;
  const fs::path data = tmp / "app", out = tmp / "job";
  const int keep = 2;
  write_stories(data / "night00.jsonl", 0, 8);
  for (int night = 1; night <= 30; ++night) {
    char name[32];
    std::snprintf(name, sizeof name, "night%02d.jsonl", night);
    write_stories(data / name, 8 + 2 * night, 2);
    // A negative margin publishes nearly every night, so pruning has work to do.
    nltest::CmdResult r = nltest::run_cli(generic_nightly_args(
        model, data, out, "--iters 2 --save-every 1 --holdout 2 --min-heldout 2 --min-improvement -100 --keep-adapters " +
                              std::to_string(keep)));
    ASSERT_EQ(r.rc, 0) << "night " << night << "\n" << r.out << r.err;
  }
  int64_t n_published = 0;
  for (const auto& e : fs::directory_iterator(out / "adapters")) n_published += e.is_directory();
  EXPECT_GE(n_published, 1);
  EXPECT_LE(n_published, keep);
  const uint64_t one_adapter = unique_bytes(out / "adapters" / fs::read_symlink(out / "current").filename(), "adapter");
  ASSERT_GT(one_adapter, 0u);
  // Every adapter file anywhere in the job (published, candidates, train's copies).
  const uint64_t adapters = unique_bytes(out, "adapter_model") + unique_bytes(out, "adapter.gguf");
  EXPECT_LE(adapters, (keep + 2) * one_adapter) << adapters << " bytes of adapters, one is " << one_adapter;
  EXPECT_EQ(unique_bytes(out, "/checkpoints/"), 0u);  // every run is sealed
  int runs_with_data = 0;
  for (const auto& e : fs::directory_iterator(out / "runs")) runs_with_data += fs::exists(e.path() / "train.jsonl");
  EXPECT_EQ(runs_with_data, 1);
}

}  // namespace
