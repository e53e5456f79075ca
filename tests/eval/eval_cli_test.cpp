// `nightlora eval`: the loss it reports is the training loss of the same examples (the first
// step's loss, the validation rows of a run), adapters and their scales add up, and --json.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

#include "test_util.h"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using nltest::run_cli;
using nltest::shq;

double eval_loss(const std::string& args) {
  auto r = run_cli("eval --json --seq-len 128 --threads 2 " + args);
  EXPECT_EQ(r.rc, 0) << r.out << r.err;
  return json::parse(r.out)["loss"].get<double>();
}

void expect_close(double a, double b, const char* what) {
  EXPECT_LE(std::abs(a - b), 1e-5 * std::abs(b)) << what << ": " << a << " vs " << b;
}

TEST(EvalCli, EqualsTheTrainingLossOfTheSameExamples) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", model);
  const fs::path data = nltest::source_dir() / "data/stories";
  const std::string m = "--model " + shq(model.string());
  nltest::TempDir td;
  // One step over all 9 validation examples: its loss is the base model's on them.
  auto one = run_cli("train " + m + " --data " + shq((data / "valid.jsonl").string()) + " --out " +
                     shq((td / "one").string()) + " --iters 1 --batch 9 --seq-len 128 --threads 2 --precision f32");
  ASSERT_EQ(one.rc, 0) << one.err;
  const double step1 = nltest::read_jsonl(td / "one/log.jsonl", "train")[0]["loss"].get<double>();
  const double base = eval_loss(m + " --data " + shq((data / "valid.jsonl").string()));
  expect_close(base, step1, "base model vs the first step's loss");

  // A trained adapter: eval on the validation data gives the run's validation loss of the
  // adapter it kept.
  auto run = run_cli("train " + m + " --data " + shq((data / "train.jsonl").string()) + " --valid " +
                     shq((data / "valid.jsonl").string()) + " --out " + shq((td / "run").string()) +
                     " --iters 6 --batch 8 --lr 5e-3 --seq-len 128 --threads 2");
  ASSERT_EQ(run.rc, 0) << run.err;
  const json kept = json::parse(nltest::read_text(td / "run/run.json"))["kept_adapter"];
  const std::string valid = " --data " + shq((data / "valid.jsonl").string());
  const std::string adapter = (td / "run").string();
  const double adapted = eval_loss(m + valid + " --adapter " + shq(adapter));
  expect_close(adapted, kept["val_loss"].get<double>(), "adapter vs its validation loss in training");
  EXPECT_LT(adapted, base);

  // Scales: 0 is the base model; two halves are one whole; --lora is the same option.
  EXPECT_EQ(eval_loss(m + valid + " --adapter " + shq(adapter + ":0")), base);
  expect_close(eval_loss(m + valid + " --lora " + shq(adapter + ":0.5") + " --lora " + shq(adapter + ":0.5")), adapted,
               "two halves vs one whole");

  auto j = run_cli("eval --json --seq-len 128 " + m + valid);
  ASSERT_EQ(j.rc, 0);
  const json out = json::parse(j.out);
  EXPECT_EQ(out["examples"], 9);
  EXPECT_GT(out["supervised_tokens"].get<int64_t>(), 0);
  expect_close(out["perplexity"].get<double>(), std::exp(out["loss"].get<double>()), "perplexity");

  auto bad = run_cli("eval " + m + valid + " --adapter " + shq(adapter + ":abc"));
  EXPECT_EQ(bad.rc, 1);
  EXPECT_NE(bad.err.find("not a finite number"), std::string::npos) << bad.err;
}

}  // namespace
