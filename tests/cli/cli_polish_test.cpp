// The command line's manners: "did you mean" for a mistyped command or option, `train --help`
// grouped with defaults, --log-every / --quiet for the step lines, and the precision table
// only for a plan that mixes modes.
#include <gtest/gtest.h>

#include <sstream>

#include "nightlora/host/precision_plan.h"
#include "nightlora/modelio/model.h"
#include "nightlora/modelio/synth.h"
#include "test_util.h"

namespace fs = std::filesystem;
using nltest::run_cli;
using nltest::shq;

namespace {

TEST(DidYouMean, AMistypedCommandNamesTheClosestOnes) {
  nltest::CmdResult r = run_cli("trian --model m");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("'trian' is not a command. Did you mean 'train'?"), std::string::npos) << r.err;
  r = run_cli("mrege");
  EXPECT_NE(r.err.find("Did you mean 'merge'?"), std::string::npos) << r.err;
  r = run_cli("generat");
  EXPECT_NE(r.err.find("Did you mean 'generate'?"), std::string::npos) << r.err;
  r = run_cli("xyzzy");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("'xyzzy' is not a command."), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("Did you mean"), std::string::npos) << "nothing is close to xyzzy: " << r.err;
}

TEST(DidYouMean, AMistypedOptionNamesTheClosestOnes) {
  nltest::CmdResult r = run_cli("train --model m --data d --out o --rnak 4 --grad 2 --learning-rate=0.1");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("nightlora train: unknown option --rnak. Did you mean '--rank'?"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("unknown option --grad. Did you mean '--grad-accum'?"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("unknown option --learning-rate."), std::string::npos) << r.err;
  r = run_cli("nightly status --jsn x");
  EXPECT_NE(r.err.find("nightlora nightly status: unknown option --jsn. Did you mean '--json'?"), std::string::npos)
      << r.err;
}

TEST(TrainHelp, GroupedWithDefaults) {
  nltest::CmdResult r = run_cli("train --help");
  ASSERT_EQ(r.rc, 0) << r.err;
  size_t at = 0;
  for (const char* group : {"Model and data:", "LoRA:", "Optimisation:", "Memory and precision:", "Background job:",
                            "Output:"}) {
    const size_t found = r.out.find(std::string("\n") + group + "\n", at);
    ASSERT_NE(found, std::string::npos) << group << " missing or out of order in:\n" << r.out;
    at = found;
  }
  for (const char* shown : {"--rank INT=8", "--lr FLOAT=0.0001", "--schedule TEXT=cosine", "--precision TEXT=auto",
                            "--save-every INT:NONNEGATIVE=50", "--log-every INT:POSITIVE=1", "--config"})
    EXPECT_NE(r.out.find(shown), std::string::npos) << shown;
  // Options belong to their group: --rank under LoRA, --out under Output.
  EXPECT_LT(r.out.find("\nLoRA:"), r.out.find("--rank INT"));
  EXPECT_GT(r.out.find("\nOptimisation:"), r.out.find("--rank INT"));
  EXPECT_GT(r.out.find("-o,--out"), r.out.find("\nOutput:"));
  EXPECT_EQ(r.out.find("--fake-clock"), std::string::npos) << "test-only options stay hidden";
}

// A tiny model, six examples, and a run of `train` with extra options.
struct TinyRun {
  nltest::TempDir td;
  TinyRun() {
    nl::SynthOptions so;
    so.preset = "tiny-llama";
    so.type = nl::QType::F32;
    so.seed = 5;
    so.tokenizer = "generated";
    nl::synth_model((td / "model.gguf").string(), so);
    std::string data;
    for (int i = 0; i < 6; ++i) data += "{\"text\": \"Zorbo the dragon flew over hill number " + std::to_string(i) + ".\"}\n";
    nltest::write_text(td / "train.jsonl", data);
  }
  nltest::CmdResult train(const std::string& out, const std::string& extra) {
    return run_cli("train --model " + shq((td / "model.gguf").string()) + " --data " +
                   shq((td / "train.jsonl").string()) + " --out " + shq((td / out).string()) +
                   " --iters 6 --batch 1 --lr 1e-3 -t 1 " + extra);
  }
};

std::vector<std::string> step_lines(const std::string& out) {
  std::vector<std::string> lines;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);)
    if (line.rfind("step ", 0) == 0) lines.push_back(line.substr(5, line.find(' ', 5) - 5));
  return lines;
}

TEST(StepLines, LogEveryAndQuiet) {
  TinyRun t;
  nltest::CmdResult all = t.train("all", "--precision f32");
  ASSERT_EQ(all.rc, 0) << all.err;
  EXPECT_EQ(step_lines(all.out), (std::vector<std::string>{"1/6", "2/6", "3/6", "4/6", "5/6", "6/6"}));
  nltest::CmdResult every4 = t.train("every4", "--precision f32 --log-every 4");
  ASSERT_EQ(every4.rc, 0) << every4.err;
  EXPECT_EQ(step_lines(every4.out), (std::vector<std::string>{"4/6", "6/6"})) << "every 4th and the last";
  nltest::CmdResult quiet = t.train("quiet", "--precision f32 --quiet");
  ASSERT_EQ(quiet.rc, 0) << quiet.err;
  EXPECT_TRUE(step_lines(quiet.out).empty()) << quiet.out;
  EXPECT_NE(quiet.out.find("saved:"), std::string::npos) << "the other lines stay";
  // The log keeps every step either way.
  EXPECT_EQ(nltest::read_jsonl(t.td / "every4" / "log.jsonl", "train").size(), 6u);
  EXPECT_EQ(nltest::read_jsonl(t.td / "quiet" / "log.jsonl", "train").size(), 6u);
  EXPECT_EQ(t.train("x", "--log-every 0").rc, 1);
}

TEST(PrecisionTable, PrintedOnlyForAPlanThatMixesModes) {
  TinyRun t;
  nltest::CmdResult f32 = t.train("f32", "--precision f32 --quiet");
  ASSERT_EQ(f32.rc, 0) << f32.err;
  EXPECT_NE(f32.out.find("precision plan (f32): every product f32"), std::string::npos) << f32.out;
  EXPECT_EQ(f32.out.find("totals:"), std::string::npos) << "no table for a plan all in one mode:\n" << f32.out;

  // A plan with one product in int8: the table, with its totals.
  const int64_t n_layer = nl::Model::load((t.td / "model.gguf").string())->config.n_layer;
  nl::PrecisionPlan plan = nl::PrecisionPlan::uniform(n_layer, nl::Precision::F32);
  plan.origin = "file";
  plan.set(0, nl::Proj::Q, nl::FrozenProduct::Forward, nl::Precision::Int8);
  nltest::write_text(t.td / "plan.json", plan.to_json().dump());
  nltest::CmdResult mixed = t.train("mixed", "--quiet --precision " + shq((t.td / "plan.json").string()));
  ASSERT_EQ(mixed.rc, 0) << mixed.err;
  EXPECT_NE(mixed.out.find("layer q     k     v"), std::string::npos) << mixed.out;
  EXPECT_NE(mixed.out.find("totals: 1 int8, 0 f16,"), std::string::npos) << mixed.out;
}

}  // namespace
