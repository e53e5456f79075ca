// `nightlora nightly --task lamp2` end to end on stories260K and a synthetic LaMP-2 user: it
// publishes an adapter that is better than the current one (held-out loss and LaMP-2
// accuracy) and keeps the current one otherwise, writes its summary and decision, and a job
// killed in the middle (itself or its training child) continues when run again and ends in a
// consistent state.
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <random>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "nightlora/eval/lamp2_synth.h"
#include "nightlora/eval/nightly.h"
#include "nightlora/host/adapter_io.h"
#include "nightlora/host/lora.h"
#include "nightlora/modelio/model.h"
#include "nightly_test_helpers.h"
#include "test_util.h"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// One synthetic user with a short profile who always uses the same tag (unknown to the base
// model): a few training steps learn it, so the tests stay fast and their outcome is clear.
fs::path make_user(const fs::path& dir, uint64_t seed = 3) {
  nl::Lamp2SynthOptions o;
  o.users = 1;
  o.items_per_user = 30;
  o.questions_per_user = 2;
  o.seed = seed;
  o.tags_per_user = 1;
  o.noise = 0.0;
  nl::write_lamp2_synthetic(nl::make_lamp2_synthetic(o), dir.string());
  return dir;
}

std::string nightly_args(const fs::path& model, const fs::path& data, const fs::path& out, const std::string& extra) {
  return "nightly --model " + nltest::shq(model.string()) + " --user-data " + nltest::shq(data.string()) +
         " --out " + nltest::shq(out.string()) + " --holdout 8 --threads 2 --batch 2 --lr 1e-2 " + extra +
         // Idle priority would starve the training child on a busy test machine.
         " -- --normal-priority";
}

json decision(const fs::path& out, const std::string& run) {
  return json::parse(nltest::read_text(out / "runs" / run / "decision.json"));
}

std::string current_target(const fs::path& out) {
  return fs::read_symlink(out / "current").string();
}

// The decision follows the gate's rule: published only with a lower held-out loss (by more
// than chance) and an accuracy at least as high.
void expect_rule_followed(const json& d) {
  if (d["outcome"] != "published") return;
  EXPECT_LT(d["candidate"]["loss"].get<double>(), d["current"]["loss"].get<double>()) << d.dump();
  EXPECT_GT(d["loss_improvement"]["ci_low"].get<double>(), 0.0) << d.dump();
  EXPECT_GE(d["candidate"]["accuracy"].get<double>(), d["current"]["accuracy"].get<double>()) << d.dump();
}

TEST(Nightly, PublishesALearnedAdapterThenKeepsItAgainstAnUntrainedOne) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", model);
  nltest::TempDir tmp;
  const fs::path data = make_user(tmp / "user");
  const fs::path out = tmp / "job";
  // Night 1: a real training run against the base model.
  nltest::CmdResult r1 = nltest::run_cli(nightly_args(model, data, out, "--iters 20 --gguf"));
  ASSERT_EQ(r1.rc, 0) << r1.out << r1.err;
  const json d1 = decision(out, "0001");
  expect_rule_followed(d1);
  ASSERT_EQ(d1["outcome"], "published") << d1.dump();
  // The user's tags are learnable and unknown to the base model: training must help.
  EXPECT_GT(d1["candidate"]["accuracy"].get<double>(), d1["current"]["accuracy"].get<double>()) << d1.dump();
  EXPECT_EQ(d1["task"], "lamp2");
  EXPECT_EQ(current_target(out), "adapters/0001");
  EXPECT_TRUE(fs::exists(out / "adapters/0001/adapter_model.safetensors"));
  EXPECT_TRUE(fs::exists(out / "adapters/0001/adapter.gguf"));
  const std::string summary = nltest::read_text(out / "runs/0001/summary.md");
  EXPECT_NE(summary.find("Decision: published"), std::string::npos) << summary;
  EXPECT_NE(summary.find("Training report"), std::string::npos) << summary;

  // Night 2: a budget too small for even one step trains nothing; the learned adapter stays,
  // and nothing is scored (no candidate).
  nltest::CmdResult r2 = nltest::run_cli(nightly_args(model, data, out, "--iters 20 --budget-sec 0.000001"));
  ASSERT_EQ(r2.rc, 0) << r2.out << r2.err;
  const json d2 = decision(out, "0002");
  expect_rule_followed(d2);
  EXPECT_EQ(d2["outcome"], "kept-current") << d2.dump();
  EXPECT_TRUE(d2["budget_exhausted"].get<bool>());
  EXPECT_NE(d2["reason"].get<std::string>().find("0 step(s)"), std::string::npos) << d2.dump();
  EXPECT_EQ(d2["train_steps"], 0);
  EXPECT_FALSE(d2["diverged"].get<bool>()) << d2.dump();
  EXPECT_FALSE(d2.contains("metric")) << d2.dump();
  EXPECT_NE(r2.out.find("training budget used up"), std::string::npos) << r2.out;
  EXPECT_EQ(current_target(out), "adapters/0001");
  EXPECT_FALSE(fs::exists(out / "adapters/0002"));
  EXPECT_NE(nltest::read_text(out / "runs/0002/summary.md").find("Decision: kept"), std::string::npos);
}

TEST(Nightly, ReplacesAWorseCurrentAdapter) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", model_path);
  nltest::TempDir tmp;
  const fs::path data = make_user(tmp / "user", 5);
  const fs::path out = tmp / "job";
  // A deliberately bad adapter as the current one: large random B scrambles the model.
  auto model = nl::Model::load(model_path.string());
  nl::LoraConfig lc;
  lc.rank = 4;
  nl::LoraAdapter bad = nl::LoraAdapter::init(model->config, lc);
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  for (auto& p : bad.pairs)
    for (auto& v : p.B) v = nd(rng);
  nl::save_adapter_peft(bad, *model, (out / "adapters/bad").string());
  nl::nightly_point_current(out.string(), (out / "adapters/bad").string());
  ASSERT_EQ(nl::nightly_current_adapter(out.string()), (out / "adapters/bad").string());

  nltest::CmdResult r = nltest::run_cli(nightly_args(model_path, data, out, "--iters 20 --no-report --fresh-adapter"));
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  const json d = decision(out, "0001");
  expect_rule_followed(d);
  EXPECT_EQ(d["outcome"], "published") << d.dump();
  EXPECT_LT(d["current"]["accuracy"].get<double>(), d["candidate"]["accuracy"].get<double>()) << d.dump();
  EXPECT_EQ(d["current_before"], (out / "adapters/bad").string());
  EXPECT_EQ(current_target(out), "adapters/0001");
  EXPECT_TRUE(fs::exists(out / "adapters/bad/adapter_model.safetensors"));  // never deleted
}

TEST(Nightly, KilledJobOrChildContinuesToTheSameAdapter) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", model);
  nltest::TempDir tmp;
  const fs::path data = make_user(tmp / "user", 7);
  const std::string train = "--iters 24 --save-every 2 --no-report";
  // Reference: the same job never interrupted.
  nltest::CmdResult ref = nltest::run_cli(nightly_args(model, data, tmp / "ref", train));
  ASSERT_EQ(ref.rc, 0) << ref.out << ref.err;

  for (const std::string victim : {"job", "child"}) {
    SCOPED_TRACE(victim);
    const fs::path out = tmp / victim;
    const std::string cmd = nltest::shq(NL_CLI_PATH) + " " + nightly_args(model, data, out, train);
    nltest::CmdResult bg = nltest::run_cmd(cmd + " > " + nltest::shq((tmp / (victim + ".log")).string()) +
                                           " 2>&1 & echo $!");
    const pid_t job = static_cast<pid_t>(std::stol(bg.out));
    ASSERT_TRUE(nightly_test::wait_for_checkpoint(out)) << nltest::read_text(tmp / (victim + ".log"));
    if (victim == "job") {
      // SIGKILL of the job: its training child gets SIGTERM (parent-death signal) and stops
      // with a checkpoint; the next job waits for it through the lock.
      ::kill(job, SIGKILL);
    } else {
      nltest::CmdResult child = nltest::run_cmd("pgrep -P " + std::to_string(job));
      ASSERT_FALSE(child.out.empty()) << "no training child of " << job;
      ::kill(static_cast<pid_t>(std::stol(child.out)), SIGKILL);
    }
    nltest::run_cmd("while kill -0 " + std::to_string(job) + " 2>/dev/null; do sleep 0.1; done");
    EXPECT_FALSE(fs::exists(out / "runs/0001/decision.json"));
    EXPECT_FALSE(fs::exists(out / "current"));
    if (victim == "child") {  // the job noticed and said how to continue
      EXPECT_NE(nltest::read_text(tmp / "child.log").find("run the same command again"), std::string::npos)
          << nltest::read_text(tmp / "child.log");
    }

    nltest::CmdResult again = nltest::run_cli(nightly_args(model, data, out, train));
    ASSERT_EQ(again.rc, 0) << again.out << again.err;
    EXPECT_NE(again.out.find("continuing run"), std::string::npos) << again.out;
    EXPECT_TRUE(fs::exists(out / "runs/0001/decision.json"));
    EXPECT_FALSE(fs::exists(out / "runs/0002"));
    // Resume is exact: the same adapter as the uninterrupted job, and the same decision.
    EXPECT_EQ(nltest::read_text(out / "runs/0001/candidate/adapter_model.safetensors"),
              nltest::read_text(tmp / "ref/runs/0001/candidate/adapter_model.safetensors"));
    EXPECT_EQ(decision(out, "0001")["outcome"], decision(tmp / "ref", "0001")["outcome"]);
    EXPECT_EQ(nl::nightly_current_adapter(out.string()).empty(), nl::nightly_current_adapter((tmp / "ref").string()).empty());
  }
}

TEST(Nightly, AnOverlongProfileItemIsSkippedNotFatal) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", model);
  nltest::TempDir tmp;
  const fs::path data = make_user(tmp / "user", 11);
  // One early profile item with a ~2,000-character description: its tag falls outside
  // --seq-len, so `train` would reject the line; the job skips it and says so.
  json q = json::parse(nltest::read_text(data / "questions.json"));
  std::string long_description;
  while (long_description.size() < 2000) long_description += "a very long description of the movie ";
  for (json& question : q) question["profile"][0]["description"] = long_description;
  nltest::write_text(data / "questions.json", q.dump());
  const fs::path out = tmp / "job";
  nltest::CmdResult r = nltest::run_cli(nightly_args(model, data, out, "--iters 4 --no-report --seq-len 256"));
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("skipped 1 profile item"), std::string::npos) << r.out;
  const json run = json::parse(nltest::read_text(out / "runs/0001/run.json"));
  EXPECT_EQ(run["data"]["skipped"]["unusable"], 1);
  EXPECT_EQ(run["data"]["train_items"], 30 - 8 - 1);
  EXPECT_TRUE(fs::exists(out / "runs/0001/decision.json"));
}

TEST(Nightly, BadInputFailsClearlyBeforeWriting) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", model);
  nltest::TempDir tmp;
  nl::Lamp2SynthOptions o;
  o.users = 2;
  o.items_per_user = 8;  // as many as --holdout 8 holds out: nothing left to train on
  nl::write_lamp2_synthetic(nl::make_lamp2_synthetic(o), (tmp / "two").string());
  nltest::CmdResult r = nltest::run_cli(nightly_args(model, tmp / "two", tmp / "out", ""));
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.err.find("--user"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(tmp / "out"));
  r = nltest::run_cli(nightly_args(model, tmp / "two", tmp / "out", "--user nobody"));
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.err.find("nobody"), std::string::npos) << r.err;
  r = nltest::run_cli(nightly_args(model, tmp / "two", tmp / "out", "--user u0"));
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.err.find("too few"), std::string::npos) << r.err;
  r = nltest::run_cli(nightly_args(model, tmp / "two", tmp / "out", "--user u0 --method sgd"));
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.err.find("first-order"), std::string::npos) << r.err;
}

}  // namespace
