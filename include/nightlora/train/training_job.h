// A LoRA fine-tuning run as a resumable background job: what `nightlora train` runs, for an
// app that embeds training. Everything the run needs (model, data, adapter settings, plan
// file) is loaded and checked before the run folder is touched, so a bad input leaves
// nothing behind. The folder then receives log.jsonl (one JSON object per step, validation,
// wait and pacing decision, written as training goes), run.json (what the run is, one entry
// per session), precision_plan.json, checkpoints/ and, at the end, the adapter in both
// formats: adapter_model.safetensors + adapter_config.json (PEFT) and adapter.gguf.
//
// Running the same options again on the same folder continues from the newest good
// checkpoint and ends with the same bytes as a run that was never interrupted. Checkpoints
// are written every save_every steps, every save_every_sec seconds, on SIGINT/SIGTERM/SIGHUP,
// when background conditions make the job wait, and at the end. One process at a time: the
// job holds an exclusive lock on OUT/.lock (nl::FolderLock) while it runs.
//
// Unattended runs: the divergence guard (DivergenceGuard in host/trainer.h) never applies a
// non-finite step, rolls back with a halved learning rate, and ends a hopeless run as diverged
// without writing an adapter; no file the job writes ever holds a non-finite value. With a
// validation set the adapter written at the end is the one with the best validation loss
// (OUT/best/ keeps it across restarts), and early_stop ends the run after that many
// validations without improvement.
#pragma once
#include <cstdint>
#include <limits>
#include <string>

#include <nlohmann/json.hpp>

namespace nl {

// The options of a run: `nightlora train --help` describes each (same names, same defaults).
// Strings are parsed (and rejected with an nl::Error) by run_training_job.
struct TrainingJobOptions {
  std::string model, data, valid, out, adapter;
  int64_t rank = 8;
  float alpha = 16.0f;
  // Whether rank, alpha and targets were given explicitly: continuing an adapter refuses
  // explicit values that differ from the adapter's own (its values apply otherwise).
  bool rank_given = false, alpha_given = false, targets_given = false;
  float dropout = 0.0f;
  std::string targets = "q,k,v,o,gate,up,down";
  uint64_t lora_seed = 0;
  double lr = 1e-4;
  std::string schedule = "cosine";
  int64_t warmup = 0;
  int64_t epochs = 1;
  int64_t iters = 0;
  int64_t batch = 4;
  int64_t grad_accum = 1;
  int64_t seq_len = 512;
  uint64_t seed = 0;
  int threads = 0;
  std::string engine = "cpu";  // frozen-engine backend: cpu, vulkan or auto
  int host_threads = 1;        // host threads while engine products run (core sharing)
  std::string max_memory;      // memory budget of the step's plan ("": the default rule, memory_budget.h)
  int64_t keep_blocks = 0;     // instead of a budget: blocks whose activations are kept (0: by the budget)
  std::string train_on = "completion";
  std::string chat_format;
  std::string long_examples = "truncate";  // truncate, skip or error (dataset.h)
  std::string bad_lines = "skip";          // skip or error (dataset.h)
  int64_t val_every = 0;
  int64_t early_stop = 0;  // stop after N validations without improvement (needs valid); 0: off
  // The divergence guard (host/trainer.h DivergenceGuard).
  int max_bad_steps = 3;
  double spike_factor = 4.0;
  int max_rollbacks = 3;
  double wait_lock = 0;  // seconds to wait for another process's lock on out (< 0: forever)
  double weight_decay = 0.0;
  double clip = 1.0;
  std::string method = "first-order";  // or "mezo" (forward-only)
  double mezo_eps = 1e-3;
  // The frozen products' numeric mode: auto (calibrate a plan), f32, f16, int8, or the path
  // of a precision_plan.json; auto's tolerance and calibration batch.
  std::string precision = "auto";
  double precision_tol = 0.05;  // of the whole plan (groups), or of each product alone (each)
  int64_t precision_calib_tokens = 128;
  int64_t precision_calib_passes = 16;  // the group search's pass budget (CalibrationOptions::max_passes)
  std::string precision_search = "groups";  // or "each" (calibrate_precision's two searches)
  std::string plan_cache;                   // folder of calibrated plans; "" default, "off" (plan_cache.h)
  // Checkpoints and resume.
  int64_t save_every = 50;
  double save_every_sec = 300;
  int keep = 3;
  bool resume = false;    // fail when there is no checkpoint to continue from
  int64_t max_steps = 0;  // stop (with a checkpoint) after this many steps in this session
  // Background mode: idle priority and a gate asked before every step.
  bool background = false;
  bool normal_priority = false;  // background mode without idle priority (timed comparisons)
  bool require_power = false;
  double min_battery = -1;
  std::string window;  // daily local time window, e.g. "23:00-07:00"
  double max_wall = 0;
  double max_energy = 0;
  std::string sysfs_root = "/sys";
  double recheck_sec = 60;
  // Thermal pacing.
  double temp_ceiling = 0;
  double duty = 0;
  std::string temp_source = "auto";  // auto, file:PATH, cmd:COMMAND or sim[:key=value,...]
  double pace_poll_sec = 1.0;
  // For tests of time windows: "HH:MM[:SS],S": background mode's clock starts at that local
  // time, moves S seconds per step and jumps through waits instead of sleeping.
  std::string fake_clock;
  // For the record only (run.json's "options" and "config_file"): every option as the
  // command line and its --config file gave them, merged, and that file. Null / "": none.
  nlohmann::json options_record;
  std::string config_file;
};

// Where the run stands, given to TrainingJobOutput::progress at each event below. The numbers
// are the ones log.jsonl records for the same event (its "train", "val", "wait" and "pace"
// rows), so a caller needs no log reader.
struct TrainingProgress {
  enum class Event {
    Step,        // an optimizer step finished (status: its status line)
    Validation,  // the validation set was scored (val_loss is the new figure)
    Checkpoint,  // a checkpoint of step `step` was written
    Waiting,     // background conditions: paused true when a wait begins (reason: why), false when it ends
    Pacing,      // thermal pacing decided the idle time after step `step` (idle_s, reason)
  };
  Event event = Event::Step;
  int64_t step = 0;         // optimizer steps done
  int64_t total_steps = 0;
  int64_t epoch = 0;        // 0-based epoch of the last step's last example (the "train" row's "epoch")
  // The last step's figures ("train" row): NaN until this session's first step. A step the
  // divergence guard refused has skipped set (its loss may be NaN).
  double loss = std::numeric_limits<double>::quiet_NaN();
  double lr = std::numeric_limits<double>::quiet_NaN();
  double grad_norm = std::numeric_limits<double>::quiet_NaN();
  double tokens_per_s = std::numeric_limits<double>::quiet_NaN();
  bool skipped = false;
  double elapsed_s = 0;     // training time so far, earlier sessions included ("elapsed_s")
  // The last validation loss measured in this session ("val" row's "val_loss"); NaN before it.
  double val_loss = std::numeric_limits<double>::quiet_NaN();
  bool paused = false;      // waiting for background conditions (power, battery, time window, ...)
  double idle_s = 0;        // Pacing: the idle time inserted after the step
  std::string reason;       // Waiting / Pacing: why
  std::string status;       // Step: the one-line status (the text step_status gets)
};

// Where the run reports, as it goes. Every method may be left as is (the default ignores it).
class TrainingJobOutput {
 public:
  virtual ~TrainingJobOutput() = default;
  // A line of progress: what was loaded, the plans, resuming, waiting, stopping, saving.
  virtual void line(const std::string& text) {}
  // Something the user should check, that does not stop the run (a cut example, a damaged
  // checkpoint skipped).
  virtual void warning(const std::string& text) {}
  // The one-line status after each optimizer step (a terminal may rewrite it in place).
  virtual void step_status(const std::string& text) {}
  // Structured progress: after every step (after its status line), validation, checkpoint,
  // background wait and pacing decision, on the job's thread.
  virtual void progress(const TrainingProgress& p) {}
  // Precision calibration: pass `done` of at most `most`.
  virtual void calibration_progress(int64_t done, int64_t most) {}
  // Asked at every step boundary (and while a background wait or pacing sleep lasts): true
  // stops the run there with a checkpoint (finished false, stop_reason "stopped by the
  // caller", exit code 75), resumable by running the same options again. It may block: that
  // is how a caller pauses a job (the engine is free meanwhile).
  virtual bool stop_requested() { return false; }
};

struct TrainingJobResult {
  bool finished = false;    // the adapter is written (every step done, or stopped early)
  bool early_stopped = false;  // finished by early_stop before the last step
  bool diverged = false;    // the divergence guard gave up: no adapter was written
  std::string stop_reason;  // when not finished: "SIGINT", "--max-steps reached", a budget, the divergence, ...
  int signal = 0;           // SIGINT, SIGTERM or SIGHUP when one stopped the run, else 0
  int64_t step = 0;         // steps done (of total_steps)
  int64_t total_steps = 0;
  int64_t kept_step = -1;   // the step of the adapter written (best validation or last)
  double kept_val_loss = 0; // its validation loss, when there was a validation set
};

// The process exit code for a result (job/exit_codes.h): finished 0, diverged 3, stopped by a
// signal 128+N, otherwise stopped and resumable 75.
int exit_code_of(const TrainingJobResult& r);

// Runs (or continues) the job until it finishes, a signal or a condition stops it (with a
// checkpoint), or an error (nl::Error, nothing lost: checkpoints are written atomically).
// SIGINT and SIGTERM are caught while it runs and end it at the next step boundary.
TrainingJobResult run_training_job(const TrainingJobOptions& options, TrainingJobOutput& output);

class ResidentModel;
// The same job on a model already loaded (train/resident_model.h), for a server or an app
// that also runs inference on it: no second copy of the weights. options.model must be
// empty or resident.path(). Every use of the engine (each step, validation, the calibration)
// holds resident.turns().train(), so inference between steps (under turns().serve()) is
// safe and goes first. The process's signals are left alone: the caller stops the job
// through TrainingJobOutput::stop_requested. Thread-safe against other users of `resident`
// that take turns; one job per output folder (the folder lock).
TrainingJobResult run_training_job(const TrainingJobOptions& options, TrainingJobOutput& output,
                                   ResidentModel& resident);

}  // namespace nl
