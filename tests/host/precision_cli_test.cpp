// `nightlora train --precision ...` end to end: `auto` calibrates and prints a plan on
// stories260K and on a synthetic Q4_0 qwen2.5-0.5b cut to 2 layers, writes it to the run folder
// and into the checkpoints; training with it reaches the f32 validation loss within 1% on the
// stories fine-tuning run; a resumed run reuses the stored plan (no recalibration) and ends
// byte-identical to an uninterrupted one; a forced mode applies to every product; bad
// options fail before anything is written.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "nightlora/host/checkpoint.h"
#include "nightlora/host/precision_plan.h"
#include "resume_util.h"
#include "test_util.h"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using nltest::run_cli;
using nltest::shq;

nl::PrecisionPlan read_plan(const fs::path& run, int64_t n_layer) {
  return nl::PrecisionPlan::parse(nltest::read_text(run / "precision_plan.json"), n_layer, "precision_plan.json");
}

// How train printed `plan`: the table (a line per layer, the totals) for a plan that mixes
// modes, one line for a plan all in one mode.
void expect_plan_printed(const std::string& out, const nl::PrecisionPlan& plan, int64_t n_layer) {
  EXPECT_NE(out.find("precision plan (" + plan.origin + ")"), std::string::npos) << out;
  for (nl::Precision m : {nl::Precision::F32, nl::Precision::F16, nl::Precision::Int8})
    if (plan.all(m)) {
      EXPECT_NE(out.find(std::string("every product ") + nl::precision_name(m)), std::string::npos) << out;
      EXPECT_EQ(out.find("totals: "), std::string::npos) << out;
      return;
    }
  char last_layer[32];  // room for any long long (-Wformat-truncation)
  std::snprintf(last_layer, sizeof last_layer, "%5lld ", static_cast<long long>(n_layer - 1));
  EXPECT_NE(out.find(last_layer), std::string::npos) << out;
  EXPECT_NE(out.find("totals: "), std::string::npos) << out;
}

// The plan stored in the newest checkpoint of a run folder.
std::optional<nl::PrecisionPlan> checkpoint_plan(const fs::path& run) {
  auto ck = resume_test::checkpoints(run);
  if (ck.empty()) return std::nullopt;
  std::string file = nltest::read_text(ck.back());
  return nl::decode_checkpoint(std::string_view(file).substr(0, file.size() - 24), ck.back().string()).precision;
}

double final_val_loss(const fs::path& run) {
  std::istringstream in(nltest::read_text(run / "log.jsonl"));
  std::string line;
  double v = NAN;
  while (std::getline(in, line)) {
    json row = json::parse(line, nullptr, false);
    if (row.is_object() && row.value("type", "") == "val") v = row["val_loss"];
  }
  return v;
}

TEST(PrecisionCli, AutoOnStories260KPrintsStoresAndKeepsTheF32ValidationLoss) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", f32_model);
  const fs::path data = nltest::source_dir() / "data/stories";
  nltest::TempDir td;
  // In Q8_0, as a user would quantize it. (The down projection's rows of 172 values are not
  // whole 32-blocks, so it stays f32: its int8 products run on the engine's Q8_0 copy.)
  const fs::path model = td / "stories260K-q8_0.gguf";
  auto q = run_cli("quantize --type q8_0 --quiet " + shq(f32_model.string()) + " " + shq(model.string()));
  ASSERT_EQ(q.rc, 0) << q.out << q.err;
  auto train = [&](const std::string& precision, const fs::path& out) {
    return run_cli("train --model " + shq(model.string()) + " --data " + shq((data / "train.jsonl").string()) +
                   " --valid " + shq((data / "valid.jsonl").string()) + " --out " + shq(out.string()) +
                   " --iters 24 --batch 8 --lr 5e-3 --warmup 5 --rank 8 --alpha 16 --seq-len 256 --seed 1 --threads 2"
                   " --precision " + precision);
  };
  auto f32 = train("f32", td / "f32");
  ASSERT_EQ(f32.rc, 0) << f32.out << f32.err;
  auto aut = train("auto", td / "auto");
  ASSERT_EQ(aut.rc, 0) << aut.out << aut.err;
  std::printf("%s", aut.out.substr(0, aut.out.find("step 1/")).c_str());

  // The plan is printed (a line per layer, the totals; one line when all in one mode) with the
  // calibration's own figures.
  const nl::PrecisionPlan plan = read_plan(td / "auto", 5);
  expect_plan_printed(aut.out, plan, 5);
  EXPECT_NE(aut.out.find("calibration: "), std::string::npos) << aut.out;
  EXPECT_EQ(f32.out.find("calibration: "), std::string::npos) << f32.out;
  EXPECT_NE(f32.out.find("precision plan (f32): every product f32 (107 products)"), std::string::npos) << f32.out;

  EXPECT_EQ(plan.origin, "auto");
  // The 1% below compares a run that really used int8 products.
  EXPECT_GT(plan.count(nl::Precision::Int8), 0) << plan.table();
  ASSERT_TRUE(plan.calibration.is_object());
  EXPECT_EQ(plan.calibration["search"], "groups");
  EXPECT_EQ(plan.calibration["group_trials"].get<size_t>() + 2, plan.calibration["passes"].get<size_t>());
  ASSERT_TRUE(plan.calibration["plan_error"].is_object());
  EXPECT_LE(plan.calibration["plan_error"]["rel_err"].get<double>(), 0.05);
  EXPECT_EQ(plan.calibration["tol"], 0.05);
  auto stored = checkpoint_plan(td / "auto");
  ASSERT_TRUE(stored.has_value());
  EXPECT_EQ(stored->modes, plan.modes);
  EXPECT_TRUE(read_plan(td / "f32", 5).all(nl::Precision::F32));

  const double v32 = final_val_loss(td / "f32"), vauto = final_val_loss(td / "auto");
  std::printf("final validation loss: f32 %.5f, auto %.5f (%.3f%%)\n", v32, vauto, 100 * (vauto - v32) / v32);
  ASSERT_TRUE(std::isfinite(v32) && std::isfinite(vauto));
  EXPECT_LE(std::abs(vauto - v32), 0.01 * v32);
}

TEST(PrecisionCli, AutoOnASyntheticQ4_0Qwen05bPrintsAPlan) {
  // --threads 1: on 2026-11-29 the working tree's step was not deterministic with 2 threads on
  // this model (two identical f32 passes differed; calibration now refuses that, see
  // calibrate_precision). Few calibration tokens: the output head of a 151936-token vocabulary dominates each pass
  // that has to recompute it (those trying a cheaper mode for a forward product).
  nltest::TempDir td;
  const fs::path model = td / "qwen05b-2l.gguf";
  auto s = run_cli("synth-model --preset qwen2.5-0.5b --layers 2 --type q4_0 --tokenizer generated --seed 2 " +
                   shq(model.string()));
  ASSERT_EQ(s.rc, 0) << s.out << s.err;
  const fs::path data = nltest::source_dir() / "data/stories/train.jsonl";
  auto r = run_cli("train --model " + shq(model.string()) + " --data " + shq(data.string()) + " --out " +
                   shq((td / "run").string()) +
                   " --iters 1 --batch 1 --seq-len 8 --rank 4 --threads 1 --precision auto --precision-calib-tokens 8");
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  std::printf("%s", r.out.c_str());
  const nl::PrecisionPlan plan = read_plan(td / "run", 2);
  expect_plan_printed(r.out, plan, 2);
  EXPECT_EQ(plan.calibration["tokens"], 8);
}

TEST(PrecisionCli, ResumeReusesTheStoredPlanAndEndsByteIdentical) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", model);
  nltest::TempDir td;
  const std::string opts = "--save-every 2 --save-every-sec 0 --precision auto --precision-calib-tokens 64";
  auto ref = run_cli(resume_test::train_args(model, td / "ref", 6, opts));
  ASSERT_EQ(ref.rc, 0) << ref.out << ref.err;
  EXPECT_NE(ref.out.find("calibration: "), std::string::npos) << ref.out;

  const fs::path out = td / "run";
  auto first = run_cli(resume_test::train_args(model, out, 6, opts + " --max-steps 4"));
  ASSERT_EQ(first.rc, 75) << first.out << first.err;
  EXPECT_NE(first.out.find("calibration: "), std::string::npos) << first.out;
  const std::string plan_file = nltest::read_text(out / "precision_plan.json");

  auto second = run_cli(resume_test::train_args(model, out, 6, opts));
  ASSERT_EQ(second.rc, 0) << second.out << second.err;
  EXPECT_NE(second.out.find("resuming from"), std::string::npos) << second.out;
  EXPECT_EQ(second.out.find("calibrating"), std::string::npos) << second.out;  // not recalibrated
  EXPECT_EQ(second.out.find("calibration:"), std::string::npos) << second.out;
  EXPECT_NE(second.out.find("the plan stored in the checkpoint (auto; not recalibrated)"), std::string::npos)
      << second.out;
  EXPECT_EQ(nltest::read_text(out / "precision_plan.json"), plan_file);

  EXPECT_TRUE(nltest::read_text(out / "adapter_model.safetensors") == nltest::read_text(td / "ref/adapter_model.safetensors"));
  auto a = resume_test::checkpoints(out), b = resume_test::checkpoints(td / "ref");
  ASSERT_FALSE(a.empty());
  ASSERT_FALSE(b.empty());
  EXPECT_TRUE(resume_test::state_bytes(a.back()) == resume_test::state_bytes(b.back()));

  // Another precision choice is another run: its checkpoint is refused.
  auto other = run_cli(resume_test::train_args(model, out, 6, "--save-every 2 --save-every-sec 0 --precision f16"));
  EXPECT_NE(other.rc, 0);
  EXPECT_NE(other.err.find("--precision"), std::string::npos) << other.err;
}

// auto is the default, and a second run of the same model, engine and adapter shape takes the
// plan from the cache instead of recalibrating (the tests turn the user cache off; these runs
// name their own).
TEST(PrecisionCli, AutoIsTheDefaultAndLaterRunsTakeThePlanFromTheCache) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", model);
  nltest::TempDir td;
  const std::string cache = " --plan-cache " + shq((td / "cache").string());
  auto first = run_cli(resume_test::train_args(model, td / "a", 2, "--precision-calib-tokens 64" + cache));
  ASSERT_EQ(first.rc, 0) << first.out << first.err;
  EXPECT_NE(first.out.find("calibration: "), std::string::npos) << first.out;
  EXPECT_NE(first.out.find("precision plan (auto)"), std::string::npos) << first.out;
  ASSERT_EQ(std::distance(fs::directory_iterator(td / "cache/precision-plans"), fs::directory_iterator()), 1);

  auto second = run_cli(resume_test::train_args(model, td / "b", 2, "--precision-calib-tokens 64" + cache));
  ASSERT_EQ(second.rc, 0) << second.out << second.err;
  EXPECT_EQ(second.out.find("calibration: "), std::string::npos) << second.out;
  EXPECT_NE(second.out.find("from the cache"), std::string::npos) << second.out;
  EXPECT_EQ(read_plan(td / "b", 5).modes, read_plan(td / "a", 5).modes);

  // Another calibration setting is another key; off recalibrates; a damaged entry is
  // recalibrated (and rewritten) with a line saying so, never an error.
  auto other = run_cli(resume_test::train_args(model, td / "c", 2, "--precision-calib-tokens 32" + cache));
  ASSERT_EQ(other.rc, 0) << other.out << other.err;
  EXPECT_NE(other.out.find("calibration: "), std::string::npos) << other.out;
  auto off = run_cli(resume_test::train_args(model, td / "d", 2, "--precision-calib-tokens 64 --plan-cache off"));
  ASSERT_EQ(off.rc, 0) << off.out << off.err;
  EXPECT_NE(off.out.find("calibration: "), std::string::npos) << off.out;
  for (const auto& e : fs::directory_iterator(td / "cache/precision-plans")) nltest::write_text(e.path(), "{\"key\": 1");
  auto damaged = run_cli(resume_test::train_args(model, td / "e", 2, "--precision-calib-tokens 64" + cache));
  ASSERT_EQ(damaged.rc, 0) << damaged.out << damaged.err;
  EXPECT_NE(damaged.out.find("is damaged"), std::string::npos) << damaged.out;
  EXPECT_NE(damaged.out.find("calibration: "), std::string::npos) << damaged.out;
  auto again = run_cli(resume_test::train_args(model, td / "f", 2, "--precision-calib-tokens 64" + cache));
  EXPECT_NE(again.out.find("from the cache"), std::string::npos) << again.out;

  // --precision f32 keeps the exact path: no calibration, every product f32.
  auto exact = run_cli(resume_test::train_args(model, td / "g", 2, "--precision f32" + cache));
  ASSERT_EQ(exact.rc, 0) << exact.out << exact.err;
  EXPECT_NE(exact.out.find("precision plan (f32): every product f32 (107 products)"), std::string::npos) << exact.out;
}

TEST(PrecisionCli, ForcedModeAndPlanFilesApplyToEveryProduct) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", model);
  nltest::TempDir td;
  auto r = run_cli(resume_test::train_args(model, td / "int8", 2, "--precision int8"));
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("precision plan (int8): every product int8 (107 products)"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("totals: "), std::string::npos) << "no table for a plan all in one mode:\n" << r.out;
  EXPECT_TRUE(read_plan(td / "int8", 5).all(nl::Precision::Int8));

  // A plan file is read, validated against the model and used as is.
  nl::PrecisionPlan p = nl::PrecisionPlan::uniform(5, nl::Precision::F32);
  p.set(2, nl::Proj::Up, nl::FrozenProduct::InputGrad, nl::Precision::F16);
  const fs::path file = td / "plan.json";
  nltest::write_text(file, p.to_json().dump());
  auto f = run_cli(resume_test::train_args(model, td / "file", 2, "--precision " + shq(file.string())));
  ASSERT_EQ(f.rc, 0) << f.out << f.err;
  EXPECT_NE(f.out.find("totals: 0 int8, 1 f16, 106 f32"), std::string::npos) << f.out;

  // Hostile or mismatched plans and bad options: non-zero exit, a clear message, no run folder.
  nltest::write_text(td / "short.json", nl::PrecisionPlan::uniform(3, nl::Precision::F32).to_json().dump());
  nltest::write_text(td / "garbage.json", "{\"format\": 1");
  // Numbers no double holds and fields of the wrong type: bad input naming the field, not an internal error.
  std::string huge = p.to_json().dump();
  huge.replace(huge.find("\"n_layer\":5"), 11, "\"n_layer\":1e506");
  nltest::write_text(td / "huge.json", huge);
  std::string typed = p.to_json().dump();
  typed.replace(typed.find("\"n_layer\":5"), 11, "\"n_layer\":\"5\"");
  nltest::write_text(td / "typed.json", typed);
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"--precision int4", "not a precision mode"},
      {"--precision auto --precision-tol -1", "--precision-tol"},
      {"--precision auto --precision-calib-tokens 1", "--precision-calib-tokens"},
      {"--precision " + shq((td / "short.json").string()), "the plan is for 3 layers, the model has 5"},
      {"--precision " + shq((td / "garbage.json").string()), "invalid JSON"},
      {"--precision " + shq((td / "huge.json").string()), "huge.json: \"n_layer\": the number 1e506 is out of range"},
      {"--precision " + shq((td / "typed.json").string()), "\"n_layer\" must be a non-negative integer, found string \"5\""},
  };
  for (const auto& [opt, expect] : bad) {
    SCOPED_TRACE(opt);
    const fs::path out = td / "bad";
    auto b = run_cli(resume_test::train_args(model, out, 2, opt));
    EXPECT_EQ(b.rc, 1);  // bad input, never an internal error (2)
    EXPECT_NE(b.err.find(expect), std::string::npos) << b.err;
    EXPECT_FALSE(fs::exists(out));
  }
}

}  // namespace
