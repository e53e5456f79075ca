// Accuracy and macro-F1 as LaMP computes them (scikit-learn's f1_score over all labels,
// unparseable outputs mapped to -1), and the paired bootstrap.
#include <cmath>

#include <gtest/gtest.h>

#include "nightlora/eval/lamp2.h"
#include "nightlora/eval/metrics.h"
#include "nightlora/util/error.h"

namespace {

TEST(Metrics, HandComputedWithUnparseableOutput) {
  // golds 0 0 1 2 2, predictions 0 1 1 -1 2, four labels:
  //   label 0: TP 1, FN 1 (item 1)          F1 = 2/3
  //   label 1: TP 1, FP 1 (item 1)          F1 = 2/3
  //   label 2: TP 1, FN 1 (the -1, item 3)  F1 = 2/3
  //   label 3: never gold nor predicted     F1 = 0 (still averaged: 4 labels)
  // macro-F1 = 2/4 = 0.5. Dropping the unparseable item would give 0.5833; averaging over
  // the labels that occur only would give 0.6667.
  const nl::ClassificationMetrics m = nl::classification_metrics({0, 1, 1, -1, 2}, {0, 0, 1, 2, 2}, 4);
  EXPECT_EQ(m.n, 5);
  EXPECT_EQ(m.n_correct, 3);
  EXPECT_EQ(m.n_unparsed, 1);
  EXPECT_DOUBLE_EQ(m.accuracy, 0.6);
  EXPECT_DOUBLE_EQ(m.macro_f1, 0.5);
}

TEST(Metrics, UnparseableIsNoLabelsFalsePositive) {
  // All outputs unparseable: every label has F1 0, accuracy 0.
  const nl::ClassificationMetrics m = nl::classification_metrics({-1, -1}, {3, 4}, nl::kLamp2NumTags);
  EXPECT_EQ(m.accuracy, 0.0);
  EXPECT_EQ(m.macro_f1, 0.0);
  // A wrong but valid prediction instead: label 5 gets a FP; still 0.
  EXPECT_EQ(nl::classification_metrics({5, 5}, {3, 4}, nl::kLamp2NumTags).macro_f1, 0.0);
}

TEST(Metrics, MacroF1AveragesOverAllFifteenTags) {
  // Perfect on two tags only: F1 = 1 for those two, 0 for the 13 absent ones.
  const nl::ClassificationMetrics m = nl::classification_metrics({2, 2, 7}, {2, 2, 7}, nl::kLamp2NumTags);
  EXPECT_DOUBLE_EQ(m.accuracy, 1.0);
  EXPECT_DOUBLE_EQ(m.macro_f1, 2.0 / 15.0);
}

TEST(Metrics, PrecisionAndRecallBothMatter) {
  // Label 0: TP 2, FP 2, FN 0 -> F1 = 4/6; label 1: TP 0, FN 2 -> 0. Macro over 2 labels: 1/3.
  const nl::ClassificationMetrics m = nl::classification_metrics({0, 0, 0, 0}, {0, 0, 1, 1}, 2);
  EXPECT_DOUBLE_EQ(m.macro_f1, (4.0 / 6.0) / 2.0);
  EXPECT_DOUBLE_EQ(m.accuracy, 0.5);
}

TEST(Metrics, RejectsBadInput) {
  EXPECT_THROW(nl::classification_metrics({0}, {0, 1}, 2), nl::Error);
  EXPECT_THROW(nl::classification_metrics({0}, {-1}, 2), nl::Error);
  EXPECT_THROW(nl::classification_metrics({2}, {0}, 2), nl::Error);
  EXPECT_THROW(nl::classification_metrics({-2}, {0}, 2), nl::Error);
  const nl::ClassificationMetrics empty = nl::classification_metrics({}, {}, 2);
  EXPECT_EQ(empty.n, 0);
  EXPECT_EQ(empty.accuracy, 0.0);
}

TEST(Metrics, PerGroupAndPooled) {
  // User a: 2 of 2 correct; user b: 0 of 2 (one unparseable). Pooled accuracy 0.5, mean of
  // users 0.5; b's macro-F1 is 0.
  const nl::GroupedMetrics g =
      nl::grouped_metrics({1, 2, -1, 0}, {1, 2, 3, 3}, {"a", "a", "b", "b"}, nl::kLamp2NumTags);
  ASSERT_EQ(g.groups, (std::vector<std::string>{"a", "b"}));
  EXPECT_DOUBLE_EQ(g.per_group[0].accuracy, 1.0);
  EXPECT_DOUBLE_EQ(g.per_group[0].macro_f1, 2.0 / 15.0);
  EXPECT_DOUBLE_EQ(g.per_group[1].accuracy, 0.0);
  EXPECT_EQ(g.per_group[1].n_unparsed, 1);
  EXPECT_DOUBLE_EQ(g.overall.accuracy, 0.5);
  // Pooled: labels 1 and 2 have F1 1; label 3: FN 2, FP 0 -> 0; label 0: FP 1 -> 0.
  EXPECT_DOUBLE_EQ(g.overall.macro_f1, 2.0 / 15.0);
  EXPECT_DOUBLE_EQ(g.mean_group_accuracy, 0.5);
}

TEST(PairedBootstrap, ConstantDifferenceHasAPointInterval) {
  const nl::PairedComparison c = nl::paired_bootstrap({0.2, 0.4, 0.5}, {0.3, 0.5, 0.6}, 500, 1);
  EXPECT_NEAR(c.mean_diff, 0.1, 1e-12);
  EXPECT_NEAR(c.ci_low, 0.1, 1e-12);
  EXPECT_NEAR(c.ci_high, 0.1, 1e-12);
  EXPECT_NEAR(c.mean_a, 1.1 / 3, 1e-12);
  EXPECT_EQ(c.n_b_better, 3);
  EXPECT_EQ(c.resamples, 500);
}

TEST(PairedBootstrap, SeededAndPlausible) {
  // 100 items, B right on 50 more than A would be... here: diff 1 on 50 items, 0 on 50.
  std::vector<double> a(100, 0.0), b(100, 0.0);
  for (int i = 0; i < 50; ++i) b[static_cast<size_t>(i) * 2] = 1.0;
  const nl::PairedComparison c1 = nl::paired_bootstrap(a, b, 4000, 42);
  const nl::PairedComparison c2 = nl::paired_bootstrap(a, b, 4000, 42);
  EXPECT_EQ(c1.ci_low, c2.ci_low);
  EXPECT_EQ(c1.ci_high, c2.ci_high);
  EXPECT_DOUBLE_EQ(c1.mean_diff, 0.5);
  // The standard error of the mean is 0.05, so a 95% interval spans about +-0.1.
  EXPECT_GT(c1.ci_low, 0.36);
  EXPECT_LT(c1.ci_low, 0.44);
  EXPECT_GT(c1.ci_high, 0.56);
  EXPECT_LT(c1.ci_high, 0.64);
  EXPECT_EQ(c1.n_b_better, 50);
  EXPECT_EQ(c1.n_tied, 50);
  // Another seed draws other resamples (continuous values, so the quantiles move).
  std::vector<double> x(40), y(40);
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = std::fmod(0.37 * static_cast<double>(i), 1.0);
    y[i] = std::fmod(0.61 * static_cast<double>(i * i), 1.0);
  }
  const nl::PairedComparison s1 = nl::paired_bootstrap(x, y, 1000, 42), s2 = nl::paired_bootstrap(x, y, 1000, 43);
  EXPECT_TRUE(s1.ci_low != s2.ci_low || s1.ci_high != s2.ci_high);
  EXPECT_EQ(s1.mean_diff, s2.mean_diff);
  EXPECT_LT(s1.ci_low, s1.mean_diff);
  EXPECT_GT(s1.ci_high, s1.mean_diff);
}

TEST(PairedBootstrap, RejectsBadInput) {
  EXPECT_THROW(nl::paired_bootstrap({1.0}, {1.0, 2.0}), nl::Error);
  EXPECT_THROW(nl::paired_bootstrap({}, {}), nl::Error);
  EXPECT_THROW(nl::paired_bootstrap({1.0}, {1.0}, 0), nl::Error);
  EXPECT_THROW(nl::paired_bootstrap({1.0}, {1.0}, 10, 0, 1.0), nl::Error);
}

}  // namespace
