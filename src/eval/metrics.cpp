#include "nightlora/eval/metrics.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <unordered_map>

#include "nightlora/util/error.h"

namespace nl {

ClassificationMetrics classification_metrics(const std::vector<int>& predictions, const std::vector<int>& golds,
                                             int num_labels) {
  if (predictions.size() != golds.size())
    fail("metrics", std::to_string(predictions.size()) + " predictions for " + std::to_string(golds.size()) + " golds");
  if (num_labels < 1) fail("metrics", "need at least one label");
  ClassificationMetrics m;
  m.n = static_cast<int64_t>(golds.size());
  std::vector<int64_t> tp(num_labels, 0), fp(num_labels, 0), fn(num_labels, 0);
  for (size_t i = 0; i < golds.size(); ++i) {
    const int g = golds[i], p = predictions[i];
    if (g < 0 || g >= num_labels) fail("metrics", "gold label " + std::to_string(g) + " of item " + std::to_string(i) + " is out of range");
    if (p < -1 || p >= num_labels)
      fail("metrics", "prediction " + std::to_string(p) + " of item " + std::to_string(i) + " is out of range");
    if (p == -1) ++m.n_unparsed;
    if (p == g) {
      ++m.n_correct;
      ++tp[g];
    } else {
      ++fn[g];
      if (p >= 0) ++fp[p];  // an unparseable output is no label's false positive
    }
  }
  if (m.n == 0) return m;
  m.accuracy = static_cast<double>(m.n_correct) / static_cast<double>(m.n);
  double f1_sum = 0;
  for (int l = 0; l < num_labels; ++l) {
    const int64_t denom = 2 * tp[l] + fp[l] + fn[l];
    f1_sum += denom == 0 ? 0.0 : 2.0 * static_cast<double>(tp[l]) / static_cast<double>(denom);
  }
  m.macro_f1 = f1_sum / num_labels;
  return m;
}

GroupedMetrics grouped_metrics(const std::vector<int>& predictions, const std::vector<int>& golds,
                               const std::vector<std::string>& group_of_item, int num_labels) {
  if (group_of_item.size() != golds.size())
    fail("metrics", std::to_string(group_of_item.size()) + " group names for " + std::to_string(golds.size()) + " items");
  GroupedMetrics g;
  g.overall = classification_metrics(predictions, golds, num_labels);
  std::unordered_map<std::string, size_t> index;
  std::vector<std::vector<int>> preds, gts;
  for (size_t i = 0; i < golds.size(); ++i) {
    auto [it, fresh] = index.emplace(group_of_item[i], g.groups.size());
    if (fresh) {
      g.groups.push_back(group_of_item[i]);
      preds.emplace_back();
      gts.emplace_back();
    }
    preds[it->second].push_back(predictions[i]);
    gts[it->second].push_back(golds[i]);
  }
  for (size_t k = 0; k < g.groups.size(); ++k) {
    g.per_group.push_back(classification_metrics(preds[k], gts[k], num_labels));
    g.mean_group_accuracy += g.per_group.back().accuracy;
    g.mean_group_macro_f1 += g.per_group.back().macro_f1;
  }
  if (!g.groups.empty()) {
    g.mean_group_accuracy /= static_cast<double>(g.groups.size());
    g.mean_group_macro_f1 /= static_cast<double>(g.groups.size());
  }
  return g;
}

PairedComparison paired_bootstrap(const std::vector<double>& a, const std::vector<double>& b, int resamples,
                                  uint64_t seed, double confidence) {
  if (a.size() != b.size())
    fail("paired comparison", "the two conditions have " + std::to_string(a.size()) + " and " +
                                  std::to_string(b.size()) + " units", "compare results on the same users or items");
  if (a.empty()) fail("paired comparison", "no unit to compare");
  if (resamples < 1) fail("paired comparison", "need at least one bootstrap resample");
  if (!(confidence > 0 && confidence < 1)) fail("paired comparison", "confidence must be in (0, 1)");

  PairedComparison c;
  c.n = static_cast<int64_t>(a.size());
  c.confidence = confidence;
  c.resamples = resamples;
  c.seed = seed;
  std::vector<double> diff(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    diff[i] = b[i] - a[i];
    c.mean_a += a[i];
    c.mean_b += b[i];
    c.mean_diff += diff[i];
    if (diff[i] > 0)
      ++c.n_b_better;
    else if (diff[i] < 0)
      ++c.n_a_better;
    else
      ++c.n_tied;
  }
  const double n = static_cast<double>(a.size());
  c.mean_a /= n;
  c.mean_b /= n;
  c.mean_diff /= n;

  // Unit indices come from raw mt19937_64 output (53 bits -> [0, 1) -> index), not from a
  // std:: distribution, so the interval is the same on every platform for a seed.
  std::mt19937_64 rng(seed);
  std::vector<double> means(static_cast<size_t>(resamples));
  for (double& m : means) {
    double s = 0;
    for (size_t k = 0; k < diff.size(); ++k) {
      const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53;
      s += diff[std::min(diff.size() - 1, static_cast<size_t>(u * n))];
    }
    m = s / n;
  }
  std::sort(means.begin(), means.end());
  const double alpha = 1.0 - confidence;
  const double R = static_cast<double>(resamples);
  const size_t lo = std::min(means.size() - 1, static_cast<size_t>(std::floor(alpha / 2 * R)));
  const double hi_pos = std::ceil((1 - alpha / 2) * R) - 1;
  const size_t hi = std::min(means.size() - 1, static_cast<size_t>(std::max(0.0, hi_pos)));
  c.ci_low = means[lo];
  c.ci_high = means[hi];
  return c;
}

std::string paired_units_warning(const PairedComparison& c, const std::string& unit) {
  if (c.n >= kMinPairedUnits) return "";
  return "not meaningful: only " + std::to_string(c.n) + " " + unit + (c.n == 1 ? "" : "s") + ", fewer than " +
         std::to_string(kMinPairedUnits) + " (the interval is a few values resampled, not a confidence interval)";
}

}  // namespace nl
