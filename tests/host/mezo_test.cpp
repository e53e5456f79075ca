// MeZO (forward-only training, see nightlora/host/mezo.h): its directions, its projected
// gradient against the true directional derivative from backpropagation, that a few steps
// lower the loss, and that an interrupted run resumes exactly (in process and through the CLI).
#include <cmath>
#include <random>

#include <gtest/gtest.h>

#include "nightlora/data/dataset.h"
#include "nightlora/engine/frozen_engine.h"
#include "nightlora/host/checkpoint.h"
#include "nightlora/host/mezo.h"
#include "nightlora/host/train_step.h"
#include "nightlora/host/trainer.h"
#include "nightlora/util/error.h"
#include "resume_util.h"
#include "test_util.h"
#include "tiny_model.h"

namespace {

namespace fs = std::filesystem;

double adapter_dot(const nl::LoraAdapter& a, const nl::LoraAdapter& b) {
  double s = 0;
  for (size_t p = 0; p < a.pairs.size(); ++p) {
    for (size_t i = 0; i < a.pairs[p].A.size(); ++i) s += static_cast<double>(a.pairs[p].A[i]) * b.pairs[p].A[i];
    for (size_t i = 0; i < a.pairs[p].B.size(); ++i) s += static_cast<double>(a.pairs[p].B[i]) * b.pairs[p].B[i];
  }
  return s;
}

bool same_bytes(const nl::LoraAdapter& a, const nl::LoraAdapter& b) {
  for (size_t p = 0; p < a.pairs.size(); ++p)
    if (a.pairs[p].A != b.pairs[p].A || a.pairs[p].B != b.pairs[p].B) return false;
  return a.pairs.size() == b.pairs.size();
}

// A learnable toy language on the tiny model's 40-token vocabulary: each sequence counts up
// by 3 from a random start, the first two tokens are the prompt.
nl::Dataset counting_dataset(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  nl::Dataset ds;
  ds.source = "counting";
  for (int k = 0; k < n; ++k) {
    nl::Example e;
    int32_t t = static_cast<int32_t>(rng() % 40);
    for (int i = 0; i < 10; ++i, t = (t + 3) % 40) e.tokens.push_back(t);
    e.supervised.assign(e.tokens.size(), 1);
    e.supervised[0] = e.supervised[1] = 0;
    e.line = k + 1;
    ds.examples.push_back(e);
  }
  return ds;
}

TEST(Mezo, DirectionsAreStandardNormalAndReproducible) {
  auto tm = nltest::make_tiny_model("llama");
  nl::LoraConfig lc;
  lc.rank = 4;
  nl::LoraAdapter like = nl::LoraAdapter::init(tm.model->config, lc);
  const nl::LoraAdapter z1 = nl::mezo_direction(like, nl::mezo_step_key(5, 0));
  const nl::LoraAdapter z1again = nl::mezo_direction(like, nl::mezo_step_key(5, 0));
  const nl::LoraAdapter z2 = nl::mezo_direction(like, nl::mezo_step_key(5, 1));
  EXPECT_TRUE(same_bytes(z1, z1again));
  EXPECT_FALSE(same_bytes(z1, z2));
  const double n = static_cast<double>(like.n_params());
  double sum = 0, sq = 0;
  for (const auto& p : z1.pairs)
    for (const auto* v : {&p.A, &p.B})
      for (float x : *v) {
        ASSERT_TRUE(std::isfinite(x));
        sum += x;
        sq += static_cast<double>(x) * x;
      }
  // Mean 0 and variance 1 to within a few standard errors of n draws.
  EXPECT_NEAR(sum / n, 0.0, 5.0 / std::sqrt(n));
  EXPECT_NEAR(sq / n, 1.0, 5.0 * std::sqrt(2.0 / n));
  // Directions of different steps are (nearly) orthogonal in high dimension.
  EXPECT_LT(std::abs(adapter_dot(z1, z2)) / n, 5.0 / std::sqrt(n));
}

TEST(Mezo, ProjectedGradientIsTheDirectionalDerivative) {
  for (const std::string arch : {"llama", "qwen2"}) {
    auto tm = nltest::make_tiny_model(arch, nl::QType::F32, 3);
    const nl::Model& model = *tm.model;
    auto engine = nl::make_engine(model, {"cpu", 2});
    nl::StepOptions so;
    so.threads = 2;
    nl::TrainStep step(model, *engine, so);
    const std::vector<nl::Batch> micro = {nltest::make_batch({9, 6}, model.config.vocab, 2, 5),
                                          nltest::make_batch({7}, model.config.vocab, 1, 6)};
    int64_t n_sup = 0;
    for (const auto& b : micro) n_sup += b.n_supervised();
    nl::LoraConfig lc;
    lc.rank = 4;
    lc.alpha = 8.0f;
    lc.seed = 11;
    const nl::LoraAdapter theta = nltest::random_adapter(model.config, lc, 17, 0.05f);
    // The exact gradient of the mean loss over both micro-batches, by backpropagation.
    nl::LoraAdapter grads = theta.zeros_like();
    for (const auto& b : micro) step.forward_backward(b, theta, grads, 1.0f / static_cast<float>(n_sup), 0);
    const uint64_t key = nl::mezo_step_key(1, 4);
    const nl::LoraAdapter z = nl::mezo_direction(theta, key);
    const double directional = adapter_dot(grads, z);
    const double grad_norm = std::sqrt(adapter_dot(grads, grads));
    // Central differences along z: rounding noise of the float loss (~1e-6) over 2ε, plus a
    // truncation error O(ε²·|z|³); |z| ~ sqrt(n_params) ~ 60 here, so ε must be small.
    nl::LoraAdapter scratch = theta.zeros_like();
    const nl::MezoEstimate e = nl::mezo_estimate(step, micro, theta, scratch, key, 1e-3);
    EXPECT_EQ(e.supervised, n_sup);
    const double tol = 0.02 * std::abs(directional) + 0.01 * grad_norm;
    EXPECT_NEAR(e.projected_grad, directional, tol) << arch << ": ∇L·z " << directional << ", |∇L| " << grad_norm;
    // The check can fail: ∇L·z' for another direction z' is spread with standard deviation |∇L|,
    // far wider than the tolerance, so a wrong or misaligned z would not pass.
    EXPECT_LT(tol, 0.1 * grad_norm) << arch;
    // θ + εz regenerated for the update is the same z: the update moves θ by −lr·g·z exactly.
    nl::LoraAdapter updated = theta;
    nl::mezo_update(updated, key, 2.0, 0.5, 0.0);
    for (size_t p = 0; p < theta.pairs.size(); ++p)
      for (size_t i = 0; i < theta.pairs[p].A.size(); ++i)
        ASSERT_FLOAT_EQ(updated.pairs[p].A[i], theta.pairs[p].A[i] - 1.0f * z.pairs[p].A[i]);
  }
}

nl::TrainConfig mezo_config(int64_t iters) {
  nl::TrainConfig tc;
  tc.method = nl::TrainMethod::Mezo;
  tc.mezo_eps = 1e-3;
  tc.lr = 2e-3;
  tc.schedule = nl::ScheduleKind::Constant;
  tc.iters = iters;
  tc.batch = 4;
  tc.seed = 2;
  tc.threads = 2;
  return tc;
}

TEST(Mezo, StepsLowerTheLoss) {
  auto tm = nltest::make_tiny_model("llama", nl::QType::F32, 3);
  const nl::Dataset ds = counting_dataset(16, 1);
  nl::LoraConfig lc;
  lc.rank = 4;
  lc.seed = 1;
  nl::Trainer t(*tm.model, ds, &ds, mezo_config(150), nl::LoraAdapter::init(tm.model->config, lc));
  const nl::LoraAdapter start = nl::LoraAdapter::init(tm.model->config, lc);
  const double before = t.validate(start, 0).loss;
  int64_t steps = 0;
  nl::LoraAdapter trained = t.run([&](const nl::StepReport& r) { steps = r.step; }, nullptr);
  const double after = t.validate(trained, steps).loss;
  EXPECT_EQ(steps, 150);
  EXPECT_LT(after, before - 0.05) << "MeZO: loss " << before << " -> " << after;
  // MeZO uses no optimizer moments: the checkpointed AdamW state stays empty.
  EXPECT_EQ(t.state().adam_t, 0);
}

TEST(Mezo, RejectsDropoutAndBadEpsilon) {
  auto tm = nltest::make_tiny_model("llama");
  const nl::Dataset ds = counting_dataset(4, 1);
  nl::LoraConfig lc;
  lc.rank = 2;
  lc.dropout = 0.1f;
  EXPECT_THROW(nl::Trainer(*tm.model, ds, nullptr, mezo_config(2), nl::LoraAdapter::init(tm.model->config, lc)),
               nl::Error);
  lc.dropout = 0;
  nl::TrainConfig tc = mezo_config(2);
  tc.mezo_eps = 0;
  EXPECT_THROW(nl::Trainer(*tm.model, ds, nullptr, tc, nl::LoraAdapter::init(tm.model->config, lc)), nl::Error);
  EXPECT_THROW(nl::parse_train_method("zeroth"), nl::Error);
}

TEST(Mezo, ResumeInProcessIsExact) {
  auto tm = nltest::make_tiny_model("qwen2", nl::QType::Q8_0, 4);
  const nl::Dataset ds = counting_dataset(10, 2);
  nl::LoraConfig lc;
  lc.rank = 4;
  nl::TrainConfig tc = mezo_config(12);
  tc.schedule = nl::ScheduleKind::Cosine;
  tc.adamw.weight_decay = 0.01;
  const nl::LoraAdapter init = nl::LoraAdapter::init(tm.model->config, lc);
  nl::Trainer whole(*tm.model, ds, nullptr, tc, init);
  const nl::LoraAdapter a = whole.run(nullptr, nullptr);
  // Stop after 5 steps, carry the state through the checkpoint encoding, continue elsewhere.
  nl::Trainer first(*tm.model, ds, nullptr, tc, init);
  first.run(nullptr, nullptr, [](int64_t done) { return done < 5; });
  ASSERT_EQ(first.steps_done(), 5);
  const std::string bytes = nl::encode_train_state(first.state());
  nl::Trainer second(*tm.model, ds, nullptr, tc, init);
  second.resume(nl::decode_train_state(bytes, "memory"));
  const nl::LoraAdapter b = second.run(nullptr, nullptr);
  EXPECT_TRUE(same_bytes(a, b));
}

// A small stories260K run: shuffled data over several epochs, warmup + cosine, weight decay.
std::string mezo_train_args(const fs::path& model, const fs::path& out, int iters, const std::string& extra) {
  const fs::path data = nltest::source_dir() / "data/stories/train.jsonl";
  return "train --model " + nltest::shq(model.string()) + " --data " + nltest::shq(data.string()) + " --out " +
         nltest::shq(out.string()) + " --iters " + std::to_string(iters) +
         " --batch 2 --grad-accum 2 --seq-len 48 --lr 5e-3 --warmup 2 --rank 4 --alpha 8 --weight-decay 0.01"
         " --seed 7 --lora-seed 3 --threads 2 " + extra;
}

TEST(Mezo, CliStoppedRunResumesToTheSameBytes) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", model);
  nltest::TempDir tmp;
  const std::string mezo = "--method mezo --mezo-eps 1e-3 --save-every 2";
  nltest::CmdResult whole = nltest::run_cli(mezo_train_args(model, tmp / "whole", 6, mezo));
  ASSERT_EQ(whole.rc, 0) << whole.out << whole.err;
  EXPECT_NE(whole.out.find("training (mezo)"), std::string::npos) << whole.out;
  nltest::CmdResult part = nltest::run_cli(mezo_train_args(model, tmp / "split", 6, mezo + " --max-steps 3"));
  ASSERT_EQ(part.rc, 75) << part.out << part.err;  // stopped, resumable
  nltest::CmdResult rest = nltest::run_cli(mezo_train_args(model, tmp / "split", 6, mezo));
  ASSERT_EQ(rest.rc, 0) << rest.out << rest.err;
  EXPECT_NE(rest.out.find("resuming from"), std::string::npos) << rest.out;
  const auto cw = resume_test::checkpoints(tmp / "whole"), cs = resume_test::checkpoints(tmp / "split");
  ASSERT_FALSE(cw.empty());
  ASSERT_FALSE(cs.empty());
  EXPECT_EQ(resume_test::state_bytes(cw.back()), resume_test::state_bytes(cs.back()));
  EXPECT_EQ(nltest::read_text(tmp / "whole/adapter_model.safetensors"),
            nltest::read_text(tmp / "split/adapter_model.safetensors"));
  // A first-order checkpoint is not continued as MeZO: the method is part of the run's identity.
  nltest::CmdResult fo = nltest::run_cli(mezo_train_args(model, tmp / "fo", 6, "--max-steps 2"));
  ASSERT_EQ(fo.rc, 75) << fo.out << fo.err;
  nltest::CmdResult mixed = nltest::run_cli(mezo_train_args(model, tmp / "fo", 6, mezo));
  EXPECT_NE(mixed.rc, 0);
  EXPECT_NE(mixed.err.find("method"), std::string::npos) << mixed.err;
}

}  // namespace
