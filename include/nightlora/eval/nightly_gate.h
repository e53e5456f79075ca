// The nightly job's decision: publish the candidate adapter only when it is really better
// than the current one (or the base model when none is published yet) on the user's held-out
// items, never worse.
//
// The rule (every condition must hold; the first that fails is the reason):
//   1. training did not diverge, and the candidate's weights are all finite;
//   2. training ran at least `min_steps` optimizer steps (a run stopped at step 0 by its
//      budget is the base model under another name);
//   3. the held-out set has at least `min_heldout` items (fewer decide nothing: too noisy);
//   4. the candidate's held-out losses are all finite;
//   5. supervised-token loss: the paired bootstrap (metrics.h paired_bootstrap, per item, the
//      item's mean loss per supervised token, current minus candidate, `resamples` resamples
//      from `seed`) puts the lower end of its `confidence` interval above `min_improvement`
//      (nats per token): the candidate is better by more than chance on this many items;
//      equal losses (a tie) keep the current adapter;
//   6. when the task has a metric (LaMP-2 accuracy), the candidate's is not lower.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "nightlora/eval/heldout_loss.h"
#include "nightlora/eval/metrics.h"

namespace nl {

struct GateOptions {
  int64_t min_heldout = kMinPairedUnits;
  int64_t min_steps = 1;
  double confidence = 0.95;
  int resamples = 2000;
  uint64_t seed = 0;
  double min_improvement = 0.0;
};

// A task metric (higher is better) of both adapters on the held-out items.
struct TaskMetric {
  std::string name;  // "accuracy"
  double candidate = 0, current = 0;
};

struct GateInput {
  bool diverged = false;                  // training gave up on non-finite values (no candidate)
  bool candidate_weights_finite = true;
  int64_t train_steps = 0;
  std::vector<ExampleLoss> candidate, current;  // per held-out item, same order
  std::optional<TaskMetric> metric;
};

struct PublishDecision {
  bool publish = false;
  std::string reason;  // one sentence: why it was (not) published
  double candidate_loss = 0, current_loss = 0;  // token-weighted mean loss on the held-out items
  std::optional<PairedComparison> loss_comparison;  // per-item mean loss, a = candidate, b = current
};

PublishDecision nightly_gate(const GateInput& in, const GateOptions& opt);

// The rule above in one line, with the options' values (decision.json, summary.md).
std::string nightly_gate_rule(const GateOptions& opt);

}  // namespace nl
