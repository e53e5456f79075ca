#include "nightlora/host/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <nlohmann/json.hpp>

#include "det_rng.h"
#include "nightlora/data/batcher.h"
#include "nightlora/engine/frozen_engine.h"
#include "nightlora/host/train_step.h"
#include "nightlora/util/error.h"

namespace nl {

namespace {
// Tokens of the largest micro-batch `batch` examples of `ds` can pack into: the sum of the
// `batch` longest (the data order is shuffled, so any of them may meet).
int64_t largest_batch_tokens(const Dataset& ds, int64_t batch) {
  std::vector<int64_t> len;
  for (const Example& e : ds.examples) len.push_back(static_cast<int64_t>(e.tokens.size()));
  const size_t k = std::min(len.size(), static_cast<size_t>(std::max<int64_t>(batch, 1)));
  std::partial_sort(len.begin(), len.begin() + static_cast<std::ptrdiff_t>(k), len.end(), std::greater<>());
  int64_t sum = 0;
  for (size_t i = 0; i < k; ++i) sum += len[i];
  return sum;
}
}  // namespace

struct Trainer::Impl {
  const Model& model;
  const Dataset& train;
  const Dataset* valid;
  TrainConfig cfg;
  LoraAdapter adapter;
  std::unique_ptr<FrozenEngine> own_engine;
  FrozenEngine* engine = nullptr;  // own_engine, or the borrowed cfg.shared_engine
  std::unique_ptr<TrainStep> step;  // made by the first step or validation (the_step())
  StepOptions step_options;
  DataOrder order;
  std::vector<Batch> val_batches;
  AdamW opt;
  int64_t steps_done = 0;
  int64_t data_pos = 0;  // position in the data stream (examples consumed)
  double elapsed_before_s = 0;
  PrecisionPlan precision;  // the step reads it at every step (StepOptions::precision)
  MemoryPlan memory;        // the step's arena and kept blocks
  // The divergence guard (trainer.h).
  GuardState guard;
  std::optional<TrainState> rollback_point;
  std::function<void(const GuardEvent&)> guard_listener;
  bool diverged = false;
  std::string diverged_reason;

  Impl(const Model& m, const Dataset& t, const Dataset* v, const TrainConfig& c, LoraAdapter a)
      : model(m), train(t), valid(v), cfg(c), adapter(std::move(a)),
        order(static_cast<int64_t>(t.examples.size()), c.seed), opt(adapter, c.adamw) {
    // The memory plan first: a budget that cannot hold the run fails before the engine loads.
    MemoryRequest mr;
    mr.max_tokens = std::max(largest_batch_tokens(t, c.batch), v ? largest_batch_tokens(*v, c.batch) : 0);
    mr.rank = adapter.cfg.rank;
    mr.n_adapter_params = adapter.n_params();
    mr.max_memory = c.max_memory;
    mr.budget_rule = c.max_memory_rule;
    mr.keep_blocks = c.keep_blocks;
    mr.rollback_copy = true;
    mr.saves_checkpoints = c.saves_checkpoints;
    mr.keeps_best_adapter = c.saves_checkpoints && v;  // a training job keeps its best-validated adapter
    mr.int8_products = c.int8_products;
    mr.calibration_tokens = c.calibration_tokens;
    mr.calibration_replay_bytes = c.calibration_replay_bytes;
    // The process as it is now (code, libraries, model metadata, tokenizer, data), less the
    // adapter's parameters and moments, which adapter_bytes counts. A borrowed engine's weights are in
    // it already and would be counted twice: then the fixed allowance.
    const size_t resident = c.shared_engine ? 0 : process_resident_bytes();
    // (opt, made above, holds the two moments.)
    const size_t adapter_now = static_cast<size_t>(adapter.n_params()) * sizeof(float) * 3;
    mr.resident_bytes = resident > adapter_now ? resident - adapter_now : 0;
    memory = plan_step_memory(model, mr);
    if (cfg.shared_engine) {
      engine = cfg.shared_engine;
    } else {
      EngineOptions eo;
      eo.threads = cfg.threads;
      eo.backend = cfg.engine;
      own_engine = make_engine(model, eo);
      engine = own_engine.get();
    }
    StepOptions& so = step_options;
    so.threads = cfg.threads;
    so.host_threads = cfg.host_threads;
    so.memory = &memory;
    precision = PrecisionPlan::uniform(model.config.n_layer, Precision::F32);
    so.precision = &precision;
    if (valid) val_batches = batches_in_order(*valid, cfg.batch);
  }

  // The step, made (and its arena allocated) on first use: a precision calibration before
  // it then runs without the arena, so its own buffers do not add to the step's peak.
  // Call it before taking a turn (it takes one to make the step).
  TrainStep& the_step() {
    if (!step) {
      const EngineTurns::Turn construct_turn = turn();
      step = std::make_unique<TrainStep>(model, *engine, step_options);
    }
    return *step;
  }

  // A turn on a shared engine (none needed on the trainer's own).
  EngineTurns::Turn turn() { return cfg.turns ? cfg.turns->train() : EngineTurns::Turn(); }
};

Trainer::Trainer(const Model& model, const Dataset& train, const Dataset* valid, const TrainConfig& cfg,
                 LoraAdapter adapter) {
  if (cfg.batch < 1) fail("--batch " + std::to_string(cfg.batch), "must be at least 1");
  if (cfg.grad_accum < 1) fail("--grad-accum " + std::to_string(cfg.grad_accum), "must be at least 1");
  if (cfg.iters < 0) fail("--iters " + std::to_string(cfg.iters), "must not be negative");
  if (cfg.iters == 0 && cfg.epochs < 1) fail("--epochs " + std::to_string(cfg.epochs), "must be at least 1 (or give --iters)");
  if (cfg.warmup < 0) fail("--warmup " + std::to_string(cfg.warmup), "must not be negative");
  if (!(cfg.lr > 0)) fail("--lr", "the learning rate must be positive");
  if (train.examples.empty()) fail(train.source, "the training set is empty");
  if (cfg.method == TrainMethod::Mezo && !(cfg.mezo_eps > 0))
    fail("--mezo-eps " + std::to_string(cfg.mezo_eps), "the MeZO perturbation size must be positive");
  if (cfg.method == TrainMethod::Mezo && adapter.cfg.dropout > 0)
    fail("--dropout", "MeZO compares two forward passes without dropout", "use --dropout 0 with --method mezo");
  int64_t per_step = cfg.batch * cfg.grad_accum;
  int64_t n = static_cast<int64_t>(train.examples.size());
  steps_per_epoch_ = (n + per_step - 1) / per_step;
  total_ = cfg.iters > 0 ? cfg.iters : cfg.epochs * steps_per_epoch_;
  impl_ = std::make_unique<Impl>(model, train, valid, cfg, std::move(adapter));
}

Trainer::~Trainer() = default;

const MemoryPlan& Trainer::memory_plan() const { return impl_->memory; }

ValReport Trainer::validate(const LoraAdapter& adapter, int64_t step) {
  if (!impl_->valid) fail("validation", "no validation set was given");
  double sum = 0;
  int64_t n = 0;
  TrainStep& train_step = impl_->the_step();
  const EngineTurns::Turn turn = impl_->turn();
  for (const Batch& b : impl_->val_batches) {
    StepResult r = train_step.forward_only(b, adapter);
    sum += r.loss_sum;
    n += r.n_supervised;
  }
  ValReport v;
  v.step = step;
  v.supervised = n;
  v.loss = n > 0 ? sum / static_cast<double>(n) : 0.0;
  return v;
}

namespace {
bool same_shapes(const LoraAdapter& a, const LoraAdapter& b) {
  if (a.n_layer != b.n_layer || a.pairs.size() != b.pairs.size() || a.cfg.rank != b.cfg.rank) return false;
  for (size_t i = 0; i < a.pairs.size(); ++i) {
    const LoraPair &p = a.pairs[i], &q = b.pairs[i];
    if (p.enabled != q.enabled || p.in != q.in || p.out != q.out || p.A.size() != q.A.size() || p.B.size() != q.B.size())
      return false;
  }
  return true;
}
}  // namespace

// A checkpoint's counters and shapes checked against this run, before its state replaces the
// trainer's. `shapes_match`: its adapter and moments have this trainer's adapter's shapes.
void Trainer::check_resumable(int64_t step, int64_t data_pos, bool shapes_match, bool all_finite,
                              const std::string& where) const {
  if (!shapes_match)
    fail(where, "the saved adapter's shapes do not match this model", "resume with the model it was trained on");
  // The decoder (checkpoint.cpp) has checked the counters on their own; these checks are
  // against this run.
  if (step > total_)
    fail(where, "it is at step " + std::to_string(step) + " but this run has only " + std::to_string(total_) + " steps",
         "resume with the original --iters/--epochs");
  // Every step, applied or skipped, consumes batch x grad_accum examples; the optimizer counts
  // only the applied ones.
  const int64_t per_step = impl_->cfg.batch * impl_->cfg.grad_accum;
  if (data_pos != step * per_step)
    fail(where, "its data position " + std::to_string(data_pos) + " does not match its step " + std::to_string(step) +
                    " (" + std::to_string(per_step) + " examples per step)",
         "the checkpoint is damaged or from other --batch/--grad-accum settings: start a new run in another --out");
  if (!all_finite) fail(where, "it holds non-finite values", "the checkpoint is damaged: start a new run in another --out");
}

void Trainer::resume(const TrainState& st, double elapsed_before_s) {
  Impl& I = *impl_;
  const bool shapes = same_shapes(st.adapter, I.adapter) && same_shapes(st.adam_m, I.adapter) &&
                      same_shapes(st.adam_v, I.adapter);
  check_resumable(st.step, st.data_pos, shapes, st.adapter.all_finite() && st.adam_m.all_finite() && st.adam_v.all_finite(),
                  "checkpoint");
  I.adapter = st.adapter;  // same shapes: copied into the vectors the trainer has
  I.opt.restore(st.adam_m, st.adam_v, st.adam_t);  // in place: a new AdamW would add two zero moments
  I.steps_done = st.step;
  I.data_pos = st.data_pos;
  I.elapsed_before_s = elapsed_before_s;
}

void Trainer::resume_from(std::string_view state_bytes, const std::string& where, double elapsed_before_s) {
  Impl& I = *impl_;
  // Everything is checked before the first value is written: a refused checkpoint leaves the
  // trainer as it was.
  const TrainStateLayout layout = read_train_state_layout(state_bytes, where);
  bool shapes = layout.shape.n_layer == I.adapter.n_layer && layout.shape.cfg.rank == I.adapter.cfg.rank &&
                layout.shape.pairs.size() == I.adapter.pairs.size();
  for (size_t i = 0; shapes && i < layout.shape.pairs.size(); ++i) {
    const LoraPair &p = layout.shape.pairs[i], &q = I.adapter.pairs[i];
    shapes = p.enabled == q.enabled && p.in == q.in && p.out == q.out;
  }
  check_resumable(layout.step, layout.data_pos, shapes, layout.all_finite, where);
  I.opt.restore_in_place(
      [&](LoraAdapter& m, LoraAdapter& v) { decode_train_state_into(state_bytes, where, I.adapter, m, v); }, layout.adam_t);
  I.steps_done = layout.step;
  I.data_pos = layout.data_pos;
  I.elapsed_before_s = elapsed_before_s;
}

TrainState Trainer::state() const {
  TrainState st;
  copy_state_into(st);
  return st;
}

// Member by member: vectors that already have the shapes keep their storage, so copying
// into an existing state (the rollback point) never holds a second copy of it.
void Trainer::copy_state_into(TrainState& p) const {
  const Impl& I = *impl_;
  p.step = I.steps_done;
  p.data_pos = I.data_pos;
  p.adapter = I.adapter;
  p.adam_m = I.opt.first_moment();
  p.adam_v = I.opt.second_moment();
  p.adam_t = I.opt.steps_taken();
}

int64_t Trainer::steps_done() const { return impl_->steps_done; }

void Trainer::set_guard_listener(std::function<void(const GuardEvent&)> listener) {
  impl_->guard_listener = std::move(listener);
}
TrainStateView Trainer::state_view() const {
  const Impl& I = *impl_;
  return {I.steps_done, I.data_pos, I.adapter, I.opt.first_moment(), I.opt.second_moment(), I.opt.steps_taken()};
}

void Trainer::set_rollback_point(const TrainState& state) { impl_->rollback_point = state; }
void Trainer::set_rollback_point_here() {
  Impl& I = *impl_;
  if (!I.rollback_point) I.rollback_point.emplace();
  copy_state_into(*I.rollback_point);
}
GuardState Trainer::guard_state() const { return impl_->guard; }
void Trainer::restore_guard(const GuardState& g) {
  if (!(g.lr_scale > 0 && g.lr_scale <= 1) || g.rollbacks < 0 || g.bad_in_row < 0 ||
      g.recent.size() > static_cast<size_t>(DivergenceGuard::kSpikeWindow))
    fail("checkpoint", "its divergence-guard state is out of range", "the checkpoint is damaged: start a new run in another --out");
  impl_->guard = g;
}
bool Trainer::diverged() const { return impl_->diverged; }
const std::string& Trainer::diverged_reason() const { return impl_->diverged_reason; }

void Trainer::set_precision(const PrecisionPlan& plan) {
  const int64_t n = impl_->model.config.n_layer;
  if (plan.n_layer != n || plan.modes.size() != static_cast<size_t>(n * kNumProj * kNumFrozenProducts))
    fail("precision plan", "made for " + std::to_string(plan.n_layer) + " layers, the model has " + std::to_string(n),
         "use a plan made for this model, or --precision auto");
  impl_->precision = plan;
}

const PrecisionPlan& Trainer::precision() const { return impl_->precision; }
const FrozenEngine& Trainer::engine() const { return *impl_->engine; }
const LoraConfig& Trainer::lora_config() const { return impl_->adapter.cfg; }

CalibrationResult Trainer::calibrate_precision(const CalibrationOptions& opt, int64_t max_tokens) {
  Impl& I = *impl_;
  // The examples training starts with, in the run's own data order.
  DataOrder order(static_cast<int64_t>(I.train.examples.size()), I.cfg.seed);
  std::vector<int64_t> idx;
  for (int64_t p = 0; p < order.size(); ++p) idx.push_back(order.at(p));
  const Batch batch = calibration_batch(I.train.examples, idx, max_tokens);
  CalibrationOptions o = opt;
  o.threads = I.cfg.threads;
  CalibrationResult r;
  {
    const EngineTurns::Turn turn = I.turn();
    r = nl::calibrate_precision(I.model, *I.engine, batch, I.adapter, o);
  }
#ifdef __GLIBC__
  // Calibration's vectors (flattened gradients, the replay recording's outputs) are freed
  // now, but glibc keeps the pages of freed heap chunks; handed back, the step's arena and
  // the checkpoint copies do not stack on them (on qwen2.5-0.5b at seq 512, 55 of the 97 MiB kept).
  malloc_trim(0);
#endif
  return r;
}

const LoraAdapter& Trainer::run(const std::function<void(const StepReport&)>& on_step,
                               const std::function<void(const ValReport&)>& on_val) {
  return run(on_step, on_val, Boundary{});
}

namespace {
// Why a step's loss should not be trusted as a sign of healthy weights: a loss far above the
// recent trend (DivergenceGuard), or "" when it is fine.
std::string loss_spike(const DivergenceGuard& g, const std::vector<double>& recent, double loss) {
  if (g.spike_factor <= 0 || recent.size() < 3) return "";
  double mean = 0;
  for (double x : recent) mean += x;
  mean /= static_cast<double>(recent.size());
  if (loss > g.spike_factor * mean && loss > mean + 2.0) {
    char buf[128];
    std::snprintf(buf, sizeof buf, "loss spike: %.4g against a recent mean of %.4g", loss, mean);
    return buf;
  }
  return "";
}
}  // namespace

const LoraAdapter& Trainer::run(const std::function<void(const StepReport&)>& on_step,
                               const std::function<void(const ValReport&)>& on_val, const Boundary& at_boundary) {
  Impl& I = *impl_;
  const TrainConfig& c = I.cfg;
  const DivergenceGuard& G = c.guard;
  I.the_step();
  using clock = std::chrono::steady_clock;
  const auto t_start = clock::now();
  LrSchedule sched{c.schedule, c.lr, 0.0, c.warmup, total_};
  AdamW& opt = I.opt;
  LoraAdapter grads = I.adapter.zeros_like();
  if (I.valid && on_val && I.steps_done == 0) on_val(validate(I.adapter, 0));
  int64_t& pos = I.data_pos;
  const int64_t first = I.steps_done;
  if (!I.rollback_point) I.rollback_point = state();
  // Goes back to the rollback point with a smaller learning rate, or ends the run as diverged
  // (at the rollback point) when the rollbacks are used up. Returns false when diverged.
  auto roll_back = [&](int64_t step, const std::string& why) {
    const TrainState& p = *I.rollback_point;
    I.adapter = p.adapter;
    I.opt.restore(p.adam_m, p.adam_v, p.adam_t);
    I.steps_done = p.step;
    pos = p.data_pos;
    I.guard.bad_in_row = 0;
    I.guard.recent.clear();
    GuardEvent e;
    e.step = step;
    e.to_step = p.step;
    if (I.guard.rollbacks >= G.max_rollbacks) {
      e.kind = GuardEvent::Kind::Diverged;
      e.lr_scale = I.guard.lr_scale;
      e.reason = why + " (after " + std::to_string(I.guard.rollbacks) + " rollback(s))";
      I.diverged = true;
      I.diverged_reason = e.reason;
    } else {
      I.guard.rollbacks++;
      I.guard.lr_scale *= G.rollback_lr_scale;
      e.lr_scale = I.guard.lr_scale;
      e.reason = why;
    }
    if (I.guard_listener) I.guard_listener(e);
    return !I.diverged;
  };
  for (int64_t s = first; s < total_; ++s) {
    // On a shared engine the step waits here for requests being served (not counted in its time).
    EngineTurns::Turn turn = I.turn();
    const auto t0 = clock::now();
    const StepTiming timing_before = I.step->total_timing();
    double optimizer_s = 0;
    // Draw this step's micro-batches first: the loss scale needs their total supervised count.
    std::vector<Batch> micro;
    int64_t n_sup = 0, n_tok = 0;
    for (int64_t k = 0; k < c.grad_accum; ++k) {
      std::vector<int64_t> idx;
      for (int64_t i = 0; i < c.batch; ++i) idx.push_back(I.order.at(pos++));
      micro.push_back(pack_batch(I.train.examples, idx));
      n_sup += micro.back().n_supervised();
      n_tok += micro.back().n_tokens();
    }
    for (auto& p : grads.pairs) {
      std::fill(p.A.begin(), p.A.end(), 0.0f);
      std::fill(p.B.begin(), p.B.end(), 0.0f);
    }
    double loss_sum = 0, norm = 0;
    const double lr = sched.at(s) * I.guard.lr_scale;
    std::string skip, rollback;  // why the step is skipped / why the run rolls back
    if (c.method == TrainMethod::Mezo) {
      // Forward-only: `grads` serves as the scratch adapter holding θ ± εz.
      const uint64_t key = mezo_step_key(c.seed, s);
      MezoEstimate e = mezo_estimate(*I.step, micro, I.adapter, grads, key, c.mezo_eps);
      loss_sum = 0.5 * (e.loss_plus + e.loss_minus) * static_cast<double>(n_sup);
      norm = std::abs(e.projected_grad);
      if (!std::isfinite(loss_sum)) skip = "non-finite loss";
      else if (!std::isfinite(norm)) skip = "non-finite projected gradient";
      else rollback = loss_spike(G, I.guard.recent, loss_sum / static_cast<double>(n_sup));
      if (skip.empty() && rollback.empty()) mezo_update(I.adapter, key, e.projected_grad, lr, c.adamw.weight_decay);
    } else {
      const float scale = 1.0f / static_cast<float>(n_sup);
      for (size_t k = 0; k < micro.size(); ++k) {
        uint64_t dropout_seed = hash_combine(hash_combine(c.seed, static_cast<uint64_t>(s)), k);
        StepResult r = I.step->forward_backward(micro[k], I.adapter, grads, scale, dropout_seed);
        loss_sum += r.loss_sum;
      }
      const auto t_opt = clock::now();
      norm = clip_grad_norm(grads, c.clip);
      if (!std::isfinite(loss_sum)) skip = "non-finite loss";
      else if (!std::isfinite(norm)) skip = "non-finite gradient";
      else rollback = loss_spike(G, I.guard.recent, loss_sum / static_cast<double>(n_sup));
      if (skip.empty() && rollback.empty()) opt.step(I.adapter, grads, lr);
      optimizer_s = std::chrono::duration<double>(clock::now() - t_opt).count();
    }
    const double loss = loss_sum / static_cast<double>(n_sup);
    if (skip.empty() && rollback.empty()) {
      if (!I.adapter.all_finite() || !opt.first_moment().all_finite() || !opt.second_moment().all_finite()) {
        rollback = "the update left non-finite values in the adapter or the optimizer";
      } else {
        I.guard.bad_in_row = 0;
        I.guard.recent.push_back(loss);
        if (I.guard.recent.size() > static_cast<size_t>(DivergenceGuard::kSpikeWindow))
          I.guard.recent.erase(I.guard.recent.begin());
      }
    }
    if (!skip.empty() && ++I.guard.bad_in_row >= G.max_bad_steps)
      rollback = std::to_string(I.guard.bad_in_row) + " steps in a row skipped (" + skip + ")";

    const auto t1 = clock::now();
    StepReport rep;
    rep.step = s + 1;
    rep.total = total_;
    rep.loss = loss;
    rep.lr = lr;
    rep.grad_norm = norm;
    rep.tokens = n_tok;
    rep.supervised = n_sup;
    rep.skipped = !skip.empty() || !rollback.empty();
    rep.skip_reason = !rollback.empty() ? rollback : skip;
    double dt = std::chrono::duration<double>(t1 - t0).count();
    rep.tokens_per_s = dt > 0 ? static_cast<double>(n_tok) / dt : 0.0;
    // The step's own breakdown; what the trainer did around it (batch packing, zeroing the
    // gradients) counts as other host work, so the host categories still sum to dt.
    rep.timing = I.step->total_timing() - timing_before;
    rep.timing.optimizer_s = optimizer_s;
    rep.timing.wall_s = dt;
    rep.timing.other_s += std::max(0.0, dt - rep.timing.host_sum_s());
    rep.peak_rss_bytes = peak_rss_bytes();
    rep.arena_bytes = I.step->arena_bytes();
    const double session_s = std::chrono::duration<double>(t1 - t_start).count();
    rep.elapsed_s = I.elapsed_before_s + session_s;
    rep.eta_s = session_s / static_cast<double>(std::max<int64_t>(1, s + 1 - first)) *
                static_cast<double>(total_ - s - 1);
    rep.epoch = I.order.epoch_of(pos - 1);
    turn.release();
    if (on_step) on_step(rep);
    if (!rollback.empty()) {
      if (!roll_back(s + 1, rollback)) break;
      s = I.steps_done - 1;  // the loop's ++s continues at the rollback point
      continue;
    }
    bool last = s + 1 == total_;
    if (I.valid && on_val && (last || (c.val_every > 0 && (s + 1) % c.val_every == 0)))
      on_val(validate(I.adapter, s + 1));
    I.steps_done = s + 1;
    if (at_boundary && !at_boundary(s + 1)) break;
  }
  // The gradients are freed as the run ends: what the caller writes from the adapter (the
  // job's final files) takes their place. The adapter is returned by reference, not copied.
  grads = LoraAdapter();
  return I.adapter;
}

std::string step_json(const StepReport& r) {
  nlohmann::json j = {{"type", "train"},       {"step", r.step},         {"total", r.total},
                      {"epoch", r.epoch},      {"loss", r.loss},         {"lr", r.lr},
                      {"grad_norm", r.grad_norm}, {"tokens", r.tokens},  {"supervised", r.supervised},
                      {"tokens_per_s", r.tokens_per_s}, {"elapsed_s", r.elapsed_s}};
  // nlohmann::json writes a non-finite number as null: the report shows it as a gap.
  if (r.skipped) {
    j["skipped"] = true;
    j["skip_reason"] = r.skip_reason;
  }
  // The step-time breakdown (see step_timing.h): host categories sum to step_s; the frozen
  // products' busy times overlap them.
  const StepTiming& t = r.timing;
  j["step_s"] = t.wall_s;
  j["breakdown_s"] = {{"frozen_forward", t.frozen_forward_s},
                      {"frozen_recompute", t.frozen_recompute_s},
                      {"frozen_input_grad", t.frozen_input_grad_s},
                      {"adapter", t.adapter_s},
                      {"attention", t.attention_s},
                      {"other", t.other_s},
                      {"optimizer", t.optimizer_s},
                      {"wait", t.wait_s},
                      {"overlap", t.overlap_s()},
                      {"outside_frozen", t.outside_frozen_s()}};
  j["peak_rss_mib"] = static_cast<double>(r.peak_rss_bytes) / (1024.0 * 1024.0);
  j["arena_mib"] = static_cast<double>(r.arena_bytes) / (1024.0 * 1024.0);
  return j.dump();
}

std::string val_json(const ValReport& r) {
  nlohmann::json j = {{"type", "val"}, {"step", r.step}, {"val_loss", r.loss}, {"supervised", r.supervised}};
  return j.dump();
}

}  // namespace nl
