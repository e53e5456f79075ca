// The training loop: data order, micro-batches with gradient accumulation, the LoRA step,
// clipping, the learning-rate schedule, AdamW, and validation. It reports each step and
// each validation through callbacks; printing and logging are the caller's.
//
// Loss normalisation: an optimizer step covers grad_accum micro-batches of `batch`
// sequences each; its loss is the mean next-token NLL over ALL supervised tokens of those
// micro-batches (each micro-batch's gradient is scaled by 1 / that total), so accumulating
// k micro-batches gives exactly the gradient of one k-times larger batch.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "nightlora/data/dataset.h"
#include "nightlora/engine/engine_turns.h"
#include "nightlora/host/checkpoint.h"
#include "nightlora/host/lora.h"
#include "nightlora/host/memory_plan.h"
#include "nightlora/host/mezo.h"
#include "nightlora/host/optimizer.h"
#include "nightlora/host/precision_plan.h"
#include "nightlora/host/schedule.h"
#include "nightlora/host/step_timing.h"
#include "nightlora/modelio/model.h"

namespace nl {

// The divergence guard. A step whose loss or gradient (MeZO: projected gradient) is not finite
// is never applied: it is skipped (its data is consumed, the schedule moves on). The run rolls
// back to its rollback point (the last checkpoint the job saved, or where run() started) with
// the learning rate multiplied by rollback_lr_scale when
//   - max_bad_steps steps in a row were skipped,
//   - a loss spikes far above the recent trend (the weights that made it are already bad):
//     more than spike_factor times the mean of the last kSpikeWindow applied steps' losses and
//     more than 2 nats above it, once 3 steps have been applied, or
//   - an applied update left a non-finite value in the adapter or the optimizer moments.
// After max_rollbacks rollbacks the next trigger ends the run as diverged, at its rollback
// point (so the state held is always finite).
struct DivergenceGuard {
  static constexpr int kSpikeWindow = 10;
  int max_bad_steps = 3;
  double spike_factor = 4.0;  // 0: no spike detection
  int max_rollbacks = 3;
  double rollback_lr_scale = 0.5;
};

// The guard's state: part of a resumable run (a checkpoint stores it; see Trainer::guard_state).
struct GuardState {
  double lr_scale = 1.0;          // product of the rollbacks' scales so far
  int rollbacks = 0;
  int bad_in_row = 0;             // skipped steps since the last applied one
  std::vector<double> recent;     // losses of the last applied steps (at most kSpikeWindow)
};

// What the guard did, for the log.
struct GuardEvent {
  enum class Kind { Rollback, Diverged };
  Kind kind = Kind::Rollback;
  int64_t step = 0;     // the step that triggered it (1-based)
  int64_t to_step = 0;  // rollback: the step the run went back to (and diverged: where it stopped)
  double lr_scale = 1;  // rollback: the learning-rate factor from now on
  std::string reason;
};

struct TrainConfig {
  AdamWOptions adamw;
  double lr = 1e-4;
  ScheduleKind schedule = ScheduleKind::Cosine;
  int64_t warmup = 0;
  int64_t epochs = 1;      // used when iters == 0
  int64_t iters = 0;       // optimizer steps; 0: epochs over the data
  int64_t batch = 4;       // sequences per micro-batch
  int64_t grad_accum = 1;  // micro-batches per optimizer step
  double clip = 1.0;       // global gradient norm cap; <= 0: none
  uint64_t seed = 0;       // data order and dropout (the adapter init has its own seed)
  int threads = 0;         // 0: all cores
  std::string engine = "cpu";  // frozen-engine backend: cpu, vulkan or auto (EngineOptions::backend)
  int64_t val_every = 0;   // validate every N steps (and always before and after); 0: before and after only
  // The step's memory plan (memory_plan.h): a budget for the estimated peak (keep as many
  // blocks' activations as fit; refuse before loading the engine when nothing fits), 0: keep
  // only the last block's. host_threads: see StepOptions (core sharing with the engine).
  size_t max_memory = 0;
  std::string max_memory_rule;  // non-empty: max_memory is a default budget (MemoryRequest::budget_rule)
  int64_t keep_blocks = 1;      // with max_memory 0: blocks whose activations are kept
  // What else the memory plan's estimate counts (MemoryRequest): checkpoint saves (a training
  // job), and a precision calibration of this many tokens with this replay cap (auto; 0:
  // none). The step's arena is allocated at the first step or validation, after any
  // calibration, so the two never hold memory at once.
  bool saves_checkpoints = false;
  bool int8_products = false;  // the precision plan may run products in int8 (int8, auto)
  int64_t calibration_tokens = 0;
  size_t calibration_replay_bytes = 0;
  int host_threads = 1;
  // first-order: backpropagation + AdamW. mezo: two forward passes per step at θ ± mezo_eps·z and
  // plain SGD (see mezo.h); it uses lr, the schedule, adamw.weight_decay and the data order as
  // first-order does, ignores clip (there is no gradient vector to clip) and needs dropout 0.
  TrainMethod method = TrainMethod::FirstOrder;
  double mezo_eps = 1e-3;
  DivergenceGuard guard;
  // A borrowed engine made for this model (a resident model that also serves inference),
  // used instead of making one; it must outlive the trainer, and `turns` (when set) is held
  // around every use of it: each step, each validation, the calibration.
  FrozenEngine* shared_engine = nullptr;
  EngineTurns* turns = nullptr;
};

struct StepReport {
  int64_t step = 0;   // 1-based: the number of updates done
  int64_t total = 0;
  double loss = 0;    // mean NLL over the step's supervised tokens
  double lr = 0;
  double grad_norm = 0;  // before clipping (MeZO: |projected gradient|)
  int64_t tokens = 0;    // tokens processed in this step (all micro-batches)
  int64_t supervised = 0;
  double tokens_per_s = 0;  // this step
  double elapsed_s = 0;     // since the start of training
  double eta_s = 0;
  int64_t epoch = 0;        // 0-based epoch of the step's last example
  bool skipped = false;     // the divergence guard refused the step (loss/grad_norm may be non-finite)
  std::string skip_reason;
  StepTiming timing;        // the step's breakdown (wall_s: the whole optimizer step)
  size_t peak_rss_bytes = 0;  // of the process so far
  size_t arena_bytes = 0;     // the step's memory plan
};

struct ValReport {
  int64_t step = 0;  // updates done when it ran
  double loss = 0;   // mean NLL over the validation set's supervised tokens
  int64_t supervised = 0;
};

class Trainer {
 public:
  // `adapter` is the starting point (fresh from LoraAdapter::init, or loaded to continue).
  // Throws nl::Error for inconsistent options (batch < 1, ...).
  Trainer(const Model& model, const Dataset& train, const Dataset* valid, const TrainConfig& cfg, LoraAdapter adapter);
  ~Trainer();

  int64_t total_steps() const { return total_; }
  // The step's memory plan (made before the engine is loaded).
  const MemoryPlan& memory_plan() const;
  int64_t steps_per_epoch() const { return steps_per_epoch_; }

  // Runs every step; returns the trained adapter: the trainer's own, by reference (valid until
  // the trainer resumes, runs again or is destroyed; copy it to keep it longer).
  const LoraAdapter& run(const std::function<void(const StepReport&)>& on_step,
                         const std::function<void(const ValReport&)>& on_val);

  // Called at each step boundary, after the step's report and validation, with the number of
  // steps done (state_view() or state() give the state then, e.g. for a checkpoint).
  // Returning false stops the run there (a stop request, a budget, a pause...).
  using Boundary = std::function<bool(int64_t steps_done)>;
  // As above, asking `at_boundary` after every step. Returns the adapter as it is when the run
  // ends or stops (by reference, as above); finished() tells which.
  const LoraAdapter& run(const std::function<void(const StepReport&)>& on_step,
                         const std::function<void(const ValReport&)>& on_val, const Boundary& at_boundary);

  // Continues from a checkpoint's state instead of the adapter given to the constructor (call
  // before run). The state's shapes must match the model; elapsed_before_s (wall time of the
  // earlier sessions) keeps StepReport::elapsed_s counting across restarts. The validation at
  // step 0 is not repeated.
  void resume(const TrainState& state, double elapsed_before_s = 0);
  // The same from a checkpoint's trajectory bytes (checkpoint_state_bytes; `where` names the
  // file in errors), decoded straight into the trainer's adapter and optimizer moments: a
  // resume holds no decoded copy of the state next to the trainer's (on qwen2.5-0.5b at rank
  // 16, 34 MiB per vector). Every check (the bytes, the shapes, this run's step count and data
  // position, finite values) is made before anything is written: a refused checkpoint
  // leaves the trainer as it was.
  void resume_from(std::string_view state_bytes, const std::string& where, double elapsed_before_s = 0);
  // The full state now: adapter, optimizer moments, step and data cursor.
  TrainState state() const;
  // The same state by reference, for saving it without a copy (write_checkpoint) or reading
  // the adapter: valid until the trainer steps, rolls back or resumes.
  TrainStateView state_view() const;
  int64_t steps_done() const;
  bool finished() const { return steps_done() >= total_; }

  // Validation loss of `adapter` (no dropout, no gradients). Requires a validation set.
  ValReport validate(const LoraAdapter& adapter, int64_t step);

  // The divergence guard (DivergenceGuard above). Events go to `listener` as they happen.
  void set_guard_listener(std::function<void(const GuardEvent&)> listener);
  // The state a rollback returns to; run() starts with the state it starts from. The job sets
  // it to each checkpoint it saves: set_rollback_point_here() makes the state now the rollback
  // point, copied into the one it replaces (no second copy, even for a moment).
  void set_rollback_point(const TrainState& state);
  void set_rollback_point_here();
  GuardState guard_state() const;
  void restore_guard(const GuardState& g);  // with resume(), from the checkpoint
  // The run ended as diverged (run() returned early; the state is the rollback point's).
  bool diverged() const;
  const std::string& diverged_reason() const;

  // The precision plan of the training steps (every product f32 until set; validation always
  // runs f32). Throws nl::Error when the plan is for another layer count.
  void set_precision(const PrecisionPlan& plan);
  const PrecisionPlan& precision() const;
  // The engine the steps run on, and the adapter's shape (rank, targets): what a plan depends on.
  const FrozenEngine& engine() const;
  const LoraConfig& lora_config() const;
  // Measures a plan (see calibrate_precision) on the first examples of the data order, at most
  // `max_tokens` tokens, with the current adapter and this trainer's engine. Does not set it.
  CalibrationResult calibrate_precision(const CalibrationOptions& opt, int64_t max_tokens);

 private:
  void copy_state_into(TrainState& p) const;
  void check_resumable(int64_t step, int64_t data_pos, bool shapes_match, bool all_finite, const std::string& where) const;
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int64_t total_ = 0, steps_per_epoch_ = 0;
};

// One line of DIR/log.jsonl for a step / a validation.
std::string step_json(const StepReport& r);
std::string val_json(const ValReport& r);

}  // namespace nl
