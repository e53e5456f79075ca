// Properties of the training step beyond gradient values: determinism (for a thread count
// and across thread counts), independence from the loss chunk size, gradient
// accumulation and loss scaling, deterministic dropout, packed sequences really being
// independent, unsupervised positions contributing nothing, and clear errors for batches
// and adapters that do not fit the model.
#include <cmath>

#include <gtest/gtest.h>

#include "nightlora/engine/frozen_engine.h"
#include "nightlora/host/train_step.h"
#include "nightlora/util/error.h"
#include "tiny_model.h"

namespace {

using nltest::make_batch;
using nltest::make_tiny_model;

struct StepRig {
  nltest::TinyModel tm;
  std::unique_ptr<nl::FrozenEngine> engine;
  std::unique_ptr<nl::TrainStep> step;
  StepRig(const std::string& arch, int threads, int64_t loss_chunk = 8, nl::QType type = nl::QType::F32)
      : tm(make_tiny_model(arch, type, 4)) {
    engine = nl::make_engine(*tm.model, {"cpu", threads});
    step = std::make_unique<nl::TrainStep>(*tm.model, *engine, nl::StepOptions{threads, loss_chunk});
  }
  const nl::ModelConfig& cfg() const { return tm.model->config; }
};

nl::LoraConfig lora_cfg(float dropout = 0.0f) {
  nl::LoraConfig c;
  c.rank = 4;
  c.alpha = 8.0f;
  c.dropout = dropout;
  c.seed = 3;
  return c;
}

bool same(const nl::LoraAdapter& a, const nl::LoraAdapter& b) {
  for (size_t i = 0; i < a.pairs.size(); ++i)
    if (a.pairs[i].A != b.pairs[i].A || a.pairs[i].B != b.pairs[i].B) return false;
  return true;
}

double max_abs_diff(const nl::LoraAdapter& a, const nl::LoraAdapter& b, float b_factor = 1.0f) {
  double m = 0;
  for (size_t i = 0; i < a.pairs.size(); ++i) {
    for (size_t k = 0; k < a.pairs[i].A.size(); ++k)
      m = std::max<double>(m, std::fabs(a.pairs[i].A[k] - b_factor * b.pairs[i].A[k]));
    for (size_t k = 0; k < a.pairs[i].B.size(); ++k)
      m = std::max<double>(m, std::fabs(a.pairs[i].B[k] - b_factor * b.pairs[i].B[k]));
  }
  return m;
}

TEST(TrainStep, BitIdenticalAcrossRunsThreadCountsAndLossChunks) {
  nl::Batch batch = make_batch({30, 21, 17}, 40, 3, 1);
  std::vector<nl::LoraAdapter> results;
  std::vector<double> losses;
  for (auto [threads, chunk] : std::vector<std::pair<int, int64_t>>{{1, 64}, {3, 64}, {3, 64}, {2, 5}, {4, 1}}) {
    StepRig s("qwen3", threads, chunk);
    nl::LoraAdapter a = nltest::random_adapter(s.cfg(), lora_cfg(), 2);
    nl::LoraAdapter g = a.zeros_like();
    losses.push_back(s.step->forward_backward(batch, a, g, 0.5f, 0).loss_sum);
    results.push_back(std::move(g));
  }
  for (size_t i = 1; i < results.size(); ++i) {
    EXPECT_EQ(losses[i], losses[0]) << "run " << i;
    EXPECT_TRUE(same(results[i], results[0])) << "run " << i << " differs by " << max_abs_diff(results[i], results[0]);
  }
}

TEST(TrainStep, ForwardOnlyMatchesAndGradientsAccumulateWithLossScale) {
  StepRig s("llama", 2);
  nl::Batch batch = make_batch({12, 9}, s.cfg().vocab, 2, 7);
  nl::LoraAdapter a = nltest::random_adapter(s.cfg(), lora_cfg(), 5);
  nl::LoraAdapter g1 = a.zeros_like(), g2 = a.zeros_like();
  const nl::StepResult r1 = s.step->forward_backward(batch, a, g1, 1.0f, 0);
  const nl::StepResult r0 = s.step->forward_only(batch, a);
  EXPECT_EQ(r0.loss_sum, r1.loss_sum);
  EXPECT_EQ(r0.n_supervised, batch.n_supervised());
  // Two calls with scale 0.25 each add up to half the gradient of one call with scale 1.
  s.step->forward_backward(batch, a, g2, 0.25f, 0);
  s.step->forward_backward(batch, a, g2, 0.25f, 0);
  EXPECT_LT(max_abs_diff(g2, g1, 0.5f), 1e-6);
  EXPECT_GT(max_abs_diff(g1, a.zeros_like()), 1e-3);
}

TEST(TrainStep, PackedSequencesAreIndependent) {
  // The loss and gradients of two packed sequences equal the sums over each one alone.
  StepRig s("qwen2", 2);
  nl::Batch both = make_batch({14, 11}, s.cfg().vocab, 1, 9);
  nl::Batch first, second;
  first.tokens.assign(both.tokens.begin(), both.tokens.begin() + 14);
  first.labels.assign(both.labels.begin(), both.labels.begin() + 14);
  first.seq_start = {0, 14};
  second.tokens.assign(both.tokens.begin() + 14, both.tokens.end());
  second.labels.assign(both.labels.begin() + 14, both.labels.end());
  second.seq_start = {0, 11};
  nl::LoraAdapter a = nltest::random_adapter(s.cfg(), lora_cfg(), 6);
  nl::LoraAdapter g_both = a.zeros_like(), g_sep = a.zeros_like();
  const double l_both = s.step->forward_backward(both, a, g_both, 1.0f, 0).loss_sum;
  const double l_sep = s.step->forward_backward(first, a, g_sep, 1.0f, 0).loss_sum +
                       s.step->forward_backward(second, a, g_sep, 1.0f, 0).loss_sum;
  EXPECT_NEAR(l_both, l_sep, 1e-4 * std::fabs(l_both));
  EXPECT_LT(max_abs_diff(g_both, g_sep), 1e-4);
}

TEST(TrainStep, UnsupervisedPositionsContributeNothing) {
  StepRig s("llama", 1);
  nl::Batch batch = make_batch({16}, s.cfg().vocab, 0, 3);
  nl::LoraAdapter a = nltest::random_adapter(s.cfg(), lora_cfg(), 1);
  // Supervise only positions 0..9: tokens after position 10 then cannot matter (causal
  // attention, and their positions are not in the loss).
  nl::Batch masked = batch;
  for (size_t t = 10; t < masked.labels.size(); ++t) masked.labels[t] = -1;
  nl::LoraAdapter g1 = a.zeros_like();
  const nl::StepResult r1 = s.step->forward_backward(masked, a, g1, 1.0f, 0);
  EXPECT_EQ(r1.n_supervised, 10);
  // The same first 11 tokens alone (position 10's token is the last label's target).
  nl::Batch prefix;
  prefix.tokens.assign(batch.tokens.begin(), batch.tokens.begin() + 11);
  prefix.labels.assign(masked.labels.begin(), masked.labels.begin() + 11);
  prefix.seq_start = {0, 11};
  nl::LoraAdapter g2 = a.zeros_like();
  const nl::StepResult r2 = s.step->forward_backward(prefix, a, g2, 1.0f, 0);
  EXPECT_NEAR(r1.loss_sum, r2.loss_sum, 1e-5 * r1.loss_sum);
  EXPECT_LT(max_abs_diff(g1, g2), 1e-5) << "causal attention: later tokens cannot affect earlier supervised positions";
  // No supervised position at all: zero loss, zero gradients.
  nl::Batch none = batch;
  for (auto& l : none.labels) l = -1;
  nl::LoraAdapter g3 = a.zeros_like();
  const nl::StepResult r3 = s.step->forward_backward(none, a, g3, 1.0f, 0);
  EXPECT_EQ(r3.n_supervised, 0);
  EXPECT_EQ(r3.loss_sum, 0.0);
  EXPECT_EQ(max_abs_diff(g3, a.zeros_like()), 0.0);
}

TEST(TrainStep, DropoutIsDeterministicFromItsSeed) {
  StepRig s("qwen3", 2);
  nl::Batch batch = make_batch({20, 13}, s.cfg().vocab, 2, 4);
  nl::LoraAdapter a = nltest::random_adapter(s.cfg(), lora_cfg(0.3f), 8);
  nl::LoraAdapter g1 = a.zeros_like(), g2 = a.zeros_like(), g3 = a.zeros_like();
  const double l1 = s.step->forward_backward(batch, a, g1, 1.0f, 42).loss_sum;
  const double l2 = s.step->forward_backward(batch, a, g2, 1.0f, 42).loss_sum;
  const double l3 = s.step->forward_backward(batch, a, g3, 1.0f, 43).loss_sum;
  EXPECT_EQ(l1, l2);
  EXPECT_TRUE(same(g1, g2));
  EXPECT_NE(l1, l3);
  EXPECT_FALSE(same(g1, g3));
  // Validation ignores dropout.
  nl::LoraAdapter no_drop = a;
  no_drop.cfg.dropout = 0.0f;
  EXPECT_EQ(s.step->forward_only(batch, a).loss_sum, s.step->forward_only(batch, no_drop).loss_sum);
  EXPECT_NE(s.step->forward_only(batch, a).loss_sum, l1);
}

TEST(TrainStep, QuantizedModelTrains) {
  // Same step on Q4_0 weights: finite loss and gradients, and a few SGD steps lower it.
  StepRig s("llama", 2, 8, nl::QType::Q4_0);
  nl::Batch batch = make_batch({24, 18}, s.cfg().vocab, 2, 12);
  nl::LoraAdapter a = nl::LoraAdapter::init(s.cfg(), lora_cfg());
  const double first = s.step->forward_only(batch, a).loss_sum;
  for (int it = 0; it < 5; ++it) {
    nl::LoraAdapter g = a.zeros_like();
    s.step->forward_backward(batch, a, g, 1.0f / static_cast<float>(batch.n_supervised()), 0);
    for (size_t i = 0; i < a.pairs.size(); ++i) {
      for (size_t k = 0; k < a.pairs[i].A.size(); ++k) a.pairs[i].A[k] -= 0.05f * g.pairs[i].A[k];
      for (size_t k = 0; k < a.pairs[i].B.size(); ++k) a.pairs[i].B[k] -= 0.05f * g.pairs[i].B[k];
    }
  }
  const double last = s.step->forward_only(batch, a).loss_sum;
  EXPECT_TRUE(std::isfinite(last));
  EXPECT_LT(last, first);
}

TEST(TrainStep, SubsetOfTargets) {
  StepRig s("qwen2", 2);
  nl::Batch batch = make_batch({15, 10}, s.cfg().vocab, 1, 2);
  nl::LoraConfig c = lora_cfg();
  c.targets = nl::LoraConfig::parse_targets("v,down");
  nl::LoraAdapter a = nltest::random_adapter(s.cfg(), c, 3);
  nl::LoraAdapter g = a.zeros_like();
  s.step->forward_backward(batch, a, g, 1.0f, 0);
  for (int64_t l = 0; l < s.cfg().n_layer; ++l)
    for (int p = 0; p < nl::kNumProj; ++p) {
      const nl::LoraPair& gp = g.at(l, static_cast<nl::Proj>(p));
      const bool want = p == static_cast<int>(nl::Proj::V) || p == static_cast<int>(nl::Proj::Down);
      EXPECT_EQ(gp.enabled, want);
      if (want) { EXPECT_FALSE(gp.A.empty()); }
      if (!want) { EXPECT_TRUE(gp.A.empty() && gp.B.empty()); }
    }
}

TEST(TrainStep, ClearErrorsForBadBatchesAndAdapters) {
  StepRig s("llama", 1);
  nl::LoraAdapter a = nltest::random_adapter(s.cfg(), lora_cfg(), 1);
  nl::LoraAdapter g = a.zeros_like();
  nl::Batch good = make_batch({8}, s.cfg().vocab, 0, 1);
  auto expect_error = [&](const nl::Batch& b, const nl::LoraAdapter& ad, nl::LoraAdapter& gr, const std::string& word) {
    try {
      s.step->forward_backward(b, ad, gr, 1.0f, 0);
      ADD_FAILURE() << "expected an error mentioning '" << word << "'";
    } catch (const nl::Error& e) {
      EXPECT_NE(std::string(e.what()).find(word), std::string::npos) << e.what();
    }
  };
  nl::Batch bad = good;
  bad.tokens[3] = static_cast<int32_t>(s.cfg().vocab);
  expect_error(bad, a, g, "vocabulary");
  bad = good;
  bad.labels[2] = 1000;
  expect_error(bad, a, g, "vocabulary");
  bad = good;
  bad.seq_start = {0, 5};
  expect_error(bad, a, g, "seq_start");
  nl::Batch empty;
  empty.seq_start = {0};
  expect_error(empty, a, g, "no tokens");
  // An adapter for another model shape.
  nltest::TinyModel other = make_tiny_model("qwen3", nl::QType::F32, 1);
  nl::LoraAdapter foreign = nl::LoraAdapter::init(other.model->config, lora_cfg());
  nl::LoraAdapter fg = foreign.zeros_like();
  expect_error(good, foreign, fg, "does not match the model");
  nl::LoraAdapter wrong_grads = nl::LoraAdapter::init(s.cfg(), [] {
    nl::LoraConfig c = lora_cfg();
    c.rank = 2;
    return c;
  }());
  expect_error(good, a, wrong_grads, "gradients");
}

}  // namespace
