// The nightly gate (see nightly_gate.h): the conditions in order, the first that fails says why.
#include "nightlora/eval/nightly_gate.h"

#include <cmath>
#include <cstdio>

namespace nl {

namespace {
double token_mean(const std::vector<ExampleLoss>& v) {
  HeldoutLoss h;
  h.examples = v;
  return h.mean();
}
std::string num(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}
}  // namespace

std::string nightly_gate_rule(const GateOptions& o) {
  return "publish only if training did not diverge, the candidate is finite everywhere, trained at least " +
         std::to_string(o.min_steps) + " step(s), the held-out set has at least " + std::to_string(o.min_heldout) +
         " items, the lower end of the " + num("%g", o.confidence * 100) +
         "% paired-bootstrap interval of (current - candidate) per-item loss is above " +
         num("%g", o.min_improvement) + " nats/token (" + std::to_string(o.resamples) +
         " resamples), and the task metric (when there is one) is not lower; otherwise keep the current adapter";
}

PublishDecision nightly_gate(const GateInput& in, const GateOptions& o) {
  PublishDecision d;
  d.candidate_loss = token_mean(in.candidate);
  d.current_loss = token_mean(in.current);
  auto no = [&](std::string why) {
    d.publish = false;
    d.reason = std::move(why);
    return d;
  };
  if (in.diverged) return no("training diverged (non-finite values even after backing off); no candidate");
  if (!in.candidate_weights_finite) return no("the candidate adapter holds non-finite weights");
  if (in.train_steps < o.min_steps)
    return no("training ran " + std::to_string(in.train_steps) + " step(s), fewer than the minimum " +
              std::to_string(o.min_steps) + " (a stopped or closed window leaves an untrained adapter)");
  const int64_t n = static_cast<int64_t>(in.candidate.size());
  if (static_cast<int64_t>(in.current.size()) != n) return no("internal: the two adapters were scored on different items");
  if (n < o.min_heldout)
    return no("the held-out set has " + std::to_string(n) + " item(s), fewer than the " +
              std::to_string(o.min_heldout) + " a decision needs: too few to tell better from luck");
  for (const ExampleLoss& e : in.candidate)
    if (!std::isfinite(e.loss_sum)) return no("the candidate's held-out loss is not finite");
  std::vector<double> cand, cur;
  for (int64_t i = 0; i < n; ++i) {
    cand.push_back(in.candidate[static_cast<size_t>(i)].mean());
    cur.push_back(in.current[static_cast<size_t>(i)].mean());
  }
  // a = candidate, b = current: b - a > 0 where the candidate's loss is lower.
  d.loss_comparison = paired_bootstrap(cand, cur, o.resamples, o.seed, o.confidence);
  const PairedComparison& c = *d.loss_comparison;
  if (!(c.ci_low > o.min_improvement)) {
    return no("held-out loss " + num("%.4f", d.candidate_loss) + " vs " + num("%.4f", d.current_loss) +
              " (current): the " + num("%g", o.confidence * 100) + "% interval of the improvement per item, [" +
              num("%+.4f", c.ci_low) + ", " + num("%+.4f", c.ci_high) + "], does not lie above " +
              num("%g", o.min_improvement) + ": not better by more than chance");
  }
  if (in.metric && in.metric->candidate < in.metric->current)
    return no("lower held-out loss (" + num("%.4f", d.candidate_loss) + " vs " + num("%.4f", d.current_loss) +
              ") but a lower " + in.metric->name + " (" + num("%.4f", in.metric->candidate) + " vs " +
              num("%.4f", in.metric->current) + ")");
  d.publish = true;
  d.reason = "held-out loss " + num("%.4f", d.candidate_loss) + " vs " + num("%.4f", d.current_loss) +
             " (current), improvement per item in [" + num("%+.4f", c.ci_low) + ", " + num("%+.4f", c.ci_high) +
             "] at " + num("%g", o.confidence * 100) + "%" +
             (in.metric ? ", " + in.metric->name + " " + num("%.4f", in.metric->candidate) + " vs " +
                              num("%.4f", in.metric->current)
                        : std::string());
  return d;
}

}  // namespace nl
