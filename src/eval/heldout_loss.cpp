// Per-example held-out loss (see heldout_loss.h), by the host training step's forward pass:
// the very computation training minimizes, so the gate judges an adapter by the objective it
// was trained on.
#include "nightlora/eval/heldout_loss.h"

#include <algorithm>
#include <cmath>

#include "nightlora/data/batcher.h"
#include "nightlora/engine/frozen_engine.h"
#include "nightlora/host/memory_plan.h"
#include "nightlora/host/precision_plan.h"
#include "nightlora/host/train_step.h"
#include "nightlora/util/error.h"

namespace nl {

double HeldoutLoss::mean() const {
  double sum = 0;
  int64_t n = 0;
  for (const ExampleLoss& e : examples) {
    sum += e.loss_sum;
    n += e.n_supervised;
  }
  return n > 0 ? sum / static_cast<double>(n) : 0.0;
}

bool HeldoutLoss::finite() const {
  return std::all_of(examples.begin(), examples.end(), [](const ExampleLoss& e) { return std::isfinite(e.loss_sum); });
}

HeldoutLoss heldout_loss(const Model& model, const LoraAdapter* adapter, const Dataset& data, int threads) {
  if (data.examples.empty()) fail(data.source, "no example to compute a held-out loss on");
  // The base model is scored through the same code path with an adapter that changes
  // nothing: B = 0 (LoraAdapter::init), the smallest one (rank 1 on q).
  LoraAdapter zero;
  if (!adapter) {
    LoraConfig lc;
    lc.rank = 1;
    lc.targets = LoraConfig::parse_targets("q");
    zero = LoraAdapter::init(model.config, lc);
    adapter = &zero;
  }
  int64_t longest = 0;
  for (const Example& e : data.examples) longest = std::max<int64_t>(longest, static_cast<int64_t>(e.tokens.size()));
  MemoryRequest mr;
  mr.max_tokens = longest;
  mr.rank = adapter->cfg.rank;
  mr.n_adapter_params = adapter->n_params();
  const MemoryPlan memory = plan_step_memory(model, mr);
  EngineOptions eo;
  eo.threads = threads;
  std::unique_ptr<FrozenEngine> engine = make_engine(model, eo);
  const PrecisionPlan precision = PrecisionPlan::uniform(model.config.n_layer, Precision::F32);
  StepOptions so;
  so.threads = threads;
  so.memory = &memory;
  so.precision = &precision;
  TrainStep step(model, *engine, so);
  HeldoutLoss out;
  out.examples.reserve(data.examples.size());
  for (size_t i = 0; i < data.examples.size(); ++i) {
    const Batch b = pack_batch(data.examples, {static_cast<int64_t>(i)});
    const StepResult r = step.forward_only(b, *adapter);
    out.examples.push_back({r.loss_sum, r.n_supervised});
  }
  return out;
}

}  // namespace nl
