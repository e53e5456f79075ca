// The training loop in-process: determinism, and gradient accumulation being exactly a
// larger batch (the loss is normalised over all supervised tokens of the step).
#include <gtest/gtest.h>

#include <cmath>

#include "nightlora/data/dataset.h"
#include "nightlora/host/trainer.h"
#include "nightlora/modelio/model.h"
#include "nightlora/tokenizer/tokenizer.h"
#include "nightlora/util/error.h"
#include "test_util.h"

namespace {

namespace fs = std::filesystem;

// Eight short examples of different lengths (so packing and normalisation matter), with the
// first half of each unsupervised, as a prompt would be.
nl::Dataset small_dataset(const nl::Tokenizer& tok) {
  const char* texts[] = {"Zorbo was a dragon.", "Lily had a red ball and a big dog.", "The sun was warm.",
                         "Tim and Zorbo played in the park all day.", "He was happy.", "She saw a bird.",
                         "The cat sat on the mat and looked at the moon.", "Zorbo flew up."};
  nl::Dataset ds;
  ds.source = "in-memory";
  int64_t line = 0;
  for (const char* t : texts) {
    nl::Example e;
    e.tokens = tok.encode(t, true);
    e.tokens.push_back(tok.eos());
    e.supervised.assign(e.tokens.size(), 0);
    for (size_t i = e.tokens.size() / 2; i < e.tokens.size(); ++i) e.supervised[i] = 1;
    e.line = ++line;
    ds.examples.push_back(e);
  }
  return ds;
}

nl::LoraAdapter train(const nl::Model& m, const nl::Dataset& ds, int64_t batch, int64_t accum,
                      std::vector<double>* losses) {
  nl::TrainConfig tc;
  tc.lr = 1e-2;
  tc.iters = 3;
  tc.batch = batch;
  tc.grad_accum = accum;
  tc.seed = 3;
  tc.threads = 2;
  tc.schedule = nl::ScheduleKind::Constant;
  nl::LoraConfig lc;
  lc.rank = 4;
  lc.seed = 9;
  nl::Trainer t(m, ds, nullptr, tc, nl::LoraAdapter::init(m.config, lc));
  return t.run([&](const nl::StepReport& r) { losses->push_back(r.loss); }, nullptr);
}

double rel_diff(const nl::LoraAdapter& a, const nl::LoraAdapter& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.pairs.size(); ++i)
    for (auto [x, y] : {std::pair{&a.pairs[i].A, &b.pairs[i].A}, std::pair{&a.pairs[i].B, &b.pairs[i].B}})
      for (size_t k = 0; k < x->size(); ++k) {
        double d = (*x)[k] - (*y)[k];
        num += d * d;
        den += static_cast<double>((*x)[k]) * (*x)[k];
      }
  return std::sqrt(num / den);
}

TEST(Trainer, DeterministicAndAccumulationEqualsALargerBatch) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", model_path);
  auto m = nl::Model::load(model_path.string());
  nl::Dataset ds = small_dataset(*m->tokenizer);
  std::vector<double> l1, l2, l3;
  nl::LoraAdapter big = train(*m, ds, 8, 1, &l1);
  nl::LoraAdapter again = train(*m, ds, 8, 1, &l2);
  nl::LoraAdapter accum = train(*m, ds, 2, 4, &l3);
  ASSERT_EQ(l1.size(), 3u);
  EXPECT_EQ(l1, l2);
  EXPECT_EQ(rel_diff(big, again), 0.0);
  // Same examples per step (the data stream is the same), same normalisation: the same
  // updates up to float summation order.
  for (size_t i = 0; i < l1.size(); ++i) EXPECT_NEAR(l1[i], l3[i], 1e-5 * l1[i]) << "step " << i;
  EXPECT_LT(rel_diff(big, accum), 1e-4);
  EXPECT_LT(l1.back(), l1.front());  // it learns
}

TEST(Trainer, RejectsBadOptions) {
  NL_REQUIRE_SHARED("stories260K/stories260K.gguf", model_path);
  auto m = nl::Model::load(model_path.string());
  nl::Dataset ds = small_dataset(*m->tokenizer);
  nl::LoraAdapter a = nl::LoraAdapter::init(m->config, {});
  for (auto tweak : {+[](nl::TrainConfig& c) { c.batch = 0; }, +[](nl::TrainConfig& c) { c.grad_accum = 0; },
                     +[](nl::TrainConfig& c) { c.lr = 0; }, +[](nl::TrainConfig& c) { c.epochs = 0; }}) {
    nl::TrainConfig tc;
    tweak(tc);
    EXPECT_THROW(nl::Trainer(*m, ds, nullptr, tc, a), nl::Error);
  }
  nl::TrainConfig tc;
  tc.batch = 3;
  tc.epochs = 2;
  nl::Trainer t(*m, ds, nullptr, tc, a);
  EXPECT_EQ(t.steps_per_epoch(), 3);  // ceil(8 / 3)
  EXPECT_EQ(t.total_steps(), 6);
}

}  // namespace
