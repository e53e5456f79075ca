// Classification metrics as LaMP defines them for LaMP-2, and paired comparisons.
//
// Predictions and golds are label indices 0..num_labels-1; -1 is an output that is not one
// of the labels (LaMP maps such an output to -1 before scoring: it is simply wrong).
//   accuracy  = share of items whose prediction equals the gold;
//   macro-F1  = mean over ALL num_labels labels of F1(l) = 2·TP / (2·TP + FP + FN), with
//               F1(l) = 0 when l is neither predicted nor gold anywhere (scikit-learn's
//               f1_score(labels=range(num_labels), average="macro"), zero_division=0, which
//               LaMP's evaluator calls). A -1 prediction is a false negative for its gold
//               label and a false positive for no label.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace nl {

struct ClassificationMetrics {
  int64_t n = 0;
  int64_t n_correct = 0;
  int64_t n_unparsed = 0;  // predictions == -1
  double accuracy = 0;
  double macro_f1 = 0;
};

// Throws nl::Error when sizes differ, a gold is outside 0..num_labels-1 or a prediction
// outside -1..num_labels-1. Empty input gives all zeros.
ClassificationMetrics classification_metrics(const std::vector<int>& predictions, const std::vector<int>& golds,
                                             int num_labels);

// Metrics per group (e.g. per user) and over all items pooled.
struct GroupedMetrics {
  ClassificationMetrics overall;
  std::vector<std::string> groups;          // in order of first appearance
  std::vector<ClassificationMetrics> per_group;
  // Mean of the per-group accuracies / macro-F1 (each user weighs the same).
  double mean_group_accuracy = 0;
  double mean_group_macro_f1 = 0;
};
GroupedMetrics grouped_metrics(const std::vector<int>& predictions, const std::vector<int>& golds,
                               const std::vector<std::string>& group_of_item, int num_labels);

// Paired comparison of two conditions measured on the same units (users or items): the
// per-unit difference b - a, its mean, and a percentile bootstrap confidence interval of the
// mean (units resampled with replacement, `resamples` times, from a seeded mt19937_64; the
// interval is the (alpha/2, 1-alpha/2) empirical quantiles of the resampled means, taken as
// the sorted values at positions floor(alpha/2·R) and ceil((1-alpha/2)·R)-1).
struct PairedComparison {
  int64_t n = 0;
  double mean_a = 0, mean_b = 0;
  double mean_diff = 0;  // mean(b - a)
  double ci_low = 0, ci_high = 0;
  double confidence = 0.95;
  int resamples = 0;
  uint64_t seed = 0;
  int64_t n_b_better = 0, n_a_better = 0, n_tied = 0;
};
// Throws nl::Error for different sizes, an empty input, resamples < 1 or confidence outside (0, 1).
PairedComparison paired_bootstrap(const std::vector<double>& a, const std::vector<double>& b, int resamples = 10000,
                                  uint64_t seed = 0, double confidence = 0.95);

// Below this many units a bootstrap interval means nothing: with one unit every resample is
// that unit (an interval of zero width), with a handful it is the few values themselves.
// The nightly gate decides nothing below it; lamp2-compare says so next to the interval.
constexpr int64_t kMinPairedUnits = 5;
// "" when c.n >= kMinPairedUnits, else a sentence saying why the interval is not meaningful
// (`unit`: "user", "item").
std::string paired_units_warning(const PairedComparison& c, const std::string& unit);

}  // namespace nl
