// `nightlora train --model M --data train.jsonl [--valid v.jsonl] --out DIR ...`: LoRA
// fine-tuning as a resumable job (nl::run_training_job, include/nightlora/train/
// training_job.h, says what DIR receives and how a run continues). This file maps the
// options (grouped in --help as the job's parts; any of them may come from --config FILE,
// cli/config_file.h) and prints the job's progress: on a terminal the step status rewrites
// one line; --log-every N and --quiet thin the per-step lines out (log.jsonl keeps them all).
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <utility>

#include "command.h"
#include "config_file.h"
#include "nightlora/job/exit_codes.h"
#include "nightlora/train/training_job.h"
#include "nightlora/util/error.h"

namespace {

// Which per-step lines are printed: every `every`-th step and the last (none with quiet); a
// step that was not applied (the divergence guard) always is.
struct StepLines {
  bool quiet = false;
  int64_t every = 1;
  bool shown(const std::string& status) const {
    if (status.find("NOT APPLIED") != std::string::npos) return true;
    if (quiet) return false;
    long long step = 0, total = 0;  // the job's status starts "step S/T"
    if (std::sscanf(status.c_str(), "step %lld/%lld", &step, &total) != 2) return true;
    return step % every == 0 || step == total;
  }
};

class ConsoleOutput final : public nl::TrainingJobOutput {
 public:
  explicit ConsoleOutput(StepLines steps) : steps_(steps) {}
  ~ConsoleOutput() override { close_status(); }
  void line(const std::string& text) override {
    close_status();
    std::printf("%s\n", text.c_str());
    std::fflush(stdout);
  }
  void warning(const std::string& text) override { std::cerr << "nightlora: warning: " << text << "\n"; }
  void step_status(const std::string& text) override {
    if (!steps_.shown(text)) return;
    if (live_) {
      std::printf("\r\033[K%s", text.c_str());
      open_ = Open::Step;
    } else {
      std::printf("%s\n", text.c_str());
    }
    std::fflush(stdout);
  }
  void calibration_progress(int64_t done, int64_t most) override {
    if (!live_) return;
    std::printf("\r\033[Kcalibrating: pass %lld (of at most %lld)", static_cast<long long>(done),
                static_cast<long long>(most));
    open_ = Open::Calibration;
    std::fflush(stdout);
  }

 private:
  // A status line left open on the terminal: a step's ends with a newline, calibration's
  // progress is erased.
  void close_status() {
    if (open_ == Open::Step) std::printf("\n");
    if (open_ == Open::Calibration) std::printf("\r\033[K");
    open_ = Open::None;
  }
  enum class Open { None, Step, Calibration };
  const StepLines steps_;
  const bool live_ = isatty(fileno(stdout));
  Open open_ = Open::None;
};

int run_train(const nl::TrainingJobOptions& options, StepLines steps) {
  for (const auto& [value, name] : {std::pair{&options.model, "model"}, {&options.data, "data"}, {&options.out, "out"}})
    if (value->empty())
      nl::fail(std::string("train --") + name, "is required",
               std::string("give it on the command line or as `") + name + " = \"...\"` in the --config file");
  ConsoleOutput out(steps);
  return nl::exit_code_of(nl::run_training_job(options, out));
}

nlcli::Register reg_train(
    "train", "Fine-tune a LoRA adapter on JSONL data; writes the adapter (PEFT and GGUF) and log.jsonl to --out",
    [](CLI::App& sub) -> nlcli::Run {
      auto a = std::make_shared<nl::TrainingJobOptions>();
      auto config = std::make_shared<std::string>();
      auto steps = std::make_shared<StepLines>();
      // Defaults are shown in --help (every option that has one captures it).
      sub.option_defaults()->always_capture_default();
      auto group = [&sub](const char* name) { sub.option_defaults()->group(name); };
      nlcli::add_config_option(sub, *config);

      group("Model and data");
      sub.add_option("-m,--model", a->model, "GGUF file or Hugging Face folder (required)");
      sub.add_option("--data", a->data, "training data (JSONL: text, prompt/completion or messages) (required)");
      sub.add_option("--valid", a->valid, "validation data (same format)");
      sub.add_option("--adapter", a->adapter, "continue training this adapter (PEFT folder or LoRA GGUF)");
      sub.add_option("--seq-len", a->seq_len, "maximum tokens per example (see --long-examples)");
      sub.add_option("--long-examples", a->long_examples,
                     "examples longer than --seq-len: truncate (keep the first tokens), skip, or error")
          ->check(CLI::IsMember({"truncate", "skip", "error"}));
      sub.add_option("--bad-lines", a->bad_lines,
                     "data lines that cannot be used (malformed JSON, wrong types, nothing to train on): skip "
                     "(count them and say which) or error (stop at the first)")
          ->check(CLI::IsMember({"skip", "error"}));
      sub.add_option("--train-on", a->train_on, "completion (loss on completions / assistant turns) or all");
      sub.add_option("--chat-format", a->chat_format, "chat template for messages data instead of detecting it");
      sub.add_option("--seed", a->seed, "seed of the data order and dropout");

      group("LoRA");
      CLI::Option* rank = sub.add_option("--rank", a->rank, "LoRA rank");
      CLI::Option* alpha = sub.add_option("--alpha", a->alpha, "LoRA alpha (scale = alpha / rank)");
      sub.add_option("--dropout", a->dropout, "LoRA dropout on the adapter input");
      CLI::Option* targets =
          sub.add_option("--targets", a->targets, "projections to adapt: subset of q,k,v,o,gate,up,down, or all");
      sub.add_option("--lora-seed", a->lora_seed, "seed of the adapter initialisation");

      group("Optimisation");
      sub.add_option("--lr", a->lr, "peak learning rate");
      sub.add_option("--schedule", a->schedule, "cosine, linear or constant (after warmup)");
      sub.add_option("--warmup", a->warmup, "linear warmup steps");
      sub.add_option("--epochs", a->epochs, "passes over the data (when --iters is 0)");
      sub.add_option("--iters", a->iters, "optimizer steps (0: use --epochs)");
      sub.add_option("--batch", a->batch, "sequences per micro-batch (packed without padding)");
      sub.add_option("--grad-accum", a->grad_accum, "micro-batches per optimizer step");
      sub.add_option("--weight-decay", a->weight_decay, "AdamW decoupled weight decay");
      sub.add_option("--clip", a->clip, "global gradient-norm clipping (0: off)");
      sub.add_option("--method", a->method,
                     "first-order (backpropagation + AdamW) or mezo (forward-only MeZO: two forward passes per "
                     "step, SGD at --lr; no clipping, needs --dropout 0)");
      sub.add_option("--mezo-eps", a->mezo_eps, "MeZO: perturbation size epsilon");
      sub.add_option("--val-every", a->val_every, "validate every N steps (always before and after); with --valid "
                     "the adapter kept is the one with the best validation loss");
      sub.add_option("--early-stop", a->early_stop,
                     "stop after N validations without improvement (needs --valid and --val-every; 0: off)");
      sub.add_option("--max-bad-steps", a->max_bad_steps,
                     "divergence guard: non-finite steps in a row (never applied) before rolling back to the last "
                     "checkpoint with the learning rate halved");
      sub.add_option("--spike-factor", a->spike_factor,
                     "divergence guard: a loss above F x the mean of the last 10 steps (and 2 nats above it) rolls "
                     "back (0: off)");
      sub.add_option("--max-rollbacks", a->max_rollbacks,
                     "divergence guard: rollbacks before the run stops as diverged (exit code 3)");

      group("Memory and precision");
      sub.add_option("-t,--threads", a->threads, "threads (0 = all cores)")->check(CLI::NonNegativeNumber);
      sub.add_option("--engine", a->engine,
                     "frozen-engine backend: cpu, vulkan (a Vulkan GPU; NL_VULKAN_DEVICE=index picks one) or auto "
                     "(vulkan when a GPU is present, else cpu)")
          ->check(CLI::IsMember({"auto", "cpu", "vulkan"}));
      sub.add_option("--host-threads", a->host_threads,
                     "threads of the host work that overlaps engine products (LoRA branch); the rest uses --threads")
          ->check(CLI::PositiveNumber);
      sub.add_option("--max-memory", a->max_memory,
                     "memory budget (bytes, or with KiB/MiB/GiB): keep as many blocks' activations as fit (less "
                     "recompute); refuse before training when even full recompute does not fit. Default: half of the "
                     "memory available now, a quarter with --background, the minimum under memory pressure");
      sub.add_option("--keep-blocks", a->keep_blocks,
                     "instead of a memory budget: blocks whose activations are kept (1: the least memory; 0: by the "
                     "budget)")
          ->check(CLI::NonNegativeNumber);
      sub.add_option("--precision", a->precision,
                     "numeric mode of the frozen products: auto (a plan calibrated by gradient sensitivity: the "
                     "cheaper modes where they move the adapter gradients by at most --precision-tol), f32 (exact), "
                     "f16, int8 (every product), or a precision_plan.json");
      sub.add_option("--precision-tol", a->precision_tol,
                     "auto: products go to the cheaper modes the engine runs faster than f32 (cpu: int8; vulkan: "
                     "int8, then f16) while the adapter gradients' relative error stays <= X and cosine >= 1 - X "
                     "(groups: of the whole plan; each: of each product alone)");
      sub.add_option("--precision-calib-tokens", a->precision_calib_tokens, "auto: tokens of the calibration batch");
      sub.add_option("--precision-calib-passes", a->precision_calib_passes,
                     "auto, groups: passes at most (the f32 reference's two included); products not reached stay f32");
      sub.add_option("--precision-search", a->precision_search,
                     "auto: groups (the whole plan within the tolerance; few passes) or each (each product alone "
                     "within it; one pass per product)")
          ->check(CLI::IsMember({"groups", "each"}));
      sub.add_option("--plan-cache", a->plan_cache,
                     "auto: folder of calibrated plans reused by later runs of the same model, engine and adapter "
                     "shape (default $NIGHTLORA_CACHE_DIR, $XDG_CACHE_HOME/nightlora or ~/.cache/nightlora), or off");

      group("Background job");
      sub.add_flag("--background", a->background,
                   "idle CPU/IO priority; run only while the conditions below hold, else checkpoint and wait; "
                   "SIGUSR1/SIGUSR2 or OUT/control ('pause'/'resume') pause and resume at a step boundary");
      sub.add_flag("--normal-priority", a->normal_priority,
                   "background: keep the normal CPU/IO priority (for timed comparisons on a busy machine)");
      sub.add_flag("--require-power", a->require_power, "background: only on external power");
      sub.add_option("--min-battery", a->min_battery, "background: only with the battery at least at X percent (-1: any)");
      sub.add_option("--window", a->window, "background: only inside this daily local time window, e.g. 23:00-07:00");
      sub.add_option("--max-wall", a->max_wall,
                     "background: stop (with a checkpoint) after S seconds of training in this session (not loading; "
                     "0: no limit)");
      sub.add_option("--max-energy", a->max_energy,
                     "background: stop after J joules (needs a readable energy counter; 0: no limit)");
      sub.add_option("--max-steps", a->max_steps, "stop after N steps in this session, with a checkpoint (0: no limit)")
          ->check(CLI::NonNegativeNumber);
      sub.add_option("--temp-ceiling", a->temp_ceiling, "pacing: idle between steps to stay below C degrees (0: off)");
      sub.add_option("--duty", a->duty, "pacing: share of wall time spent in steps, in (0, 1] (0: off)");
      sub.add_option("--temp-source", a->temp_source,
                     "pacing sensor: auto (thermal zones, hwmon), file:PATH, cmd:COMMAND, or sim[:key=value,...] "
                     "(a simulated device that heats and throttles: keys ambient, r, c, step-power, idle-power, "
                     "throttle-at, throttle-release, throttle-speed, throttle-power, start, step)");
      sub.add_flag("--resume", a->resume,
                   "continue from the newest checkpoint in --out (also done without it when one exists); "
                   "fails when there is none");
      sub.add_option("--wait-lock", a->wait_lock,
                     "seconds to wait when another process is using --out (-1: until it ends; 0: refuse at once)");
      sub.add_option("--sysfs-root", a->sysfs_root, "root of /sys (power supplies, energy), for tests")->group("");
      sub.add_option("--recheck-sec", a->recheck_sec, "background: longest wait before conditions are re-checked")
          ->group("")->check(CLI::PositiveNumber);
      sub.add_option("--fake-clock", a->fake_clock,
                     "background, for tests: HH:MM[:SS],S: the clock starts then and moves S seconds per step")
          ->group("");
      sub.add_option("--pace-poll-sec", a->pace_poll_sec, "pacing: how often the sensor is re-read while cooling")
          ->group("")->check(CLI::PositiveNumber);

      group("Output");
      sub.add_option("-o,--out", a->out, "output folder for the adapter, log.jsonl, run.json and checkpoints (required)");
      sub.add_option("--save-every", a->save_every, "checkpoint every N steps (0: off)")->check(CLI::NonNegativeNumber);
      sub.add_option("--save-every-sec", a->save_every_sec, "checkpoint every S seconds (0: off)")
          ->check(CLI::NonNegativeNumber);
      sub.add_option("--keep", a->keep, "checkpoints kept (the newest)")->check(CLI::Range(1, 1000));
      sub.add_option("--log-every", steps->every,
                     "print the step line every N steps (and the last; log.jsonl has every step either way)")
          ->check(CLI::PositiveNumber);
      sub.add_flag("-q,--quiet", steps->quiet, "no step lines (steps not applied are still reported)");

      sub.footer(nl::exit_code::table() +
                 "\nEvery option may also be a key of the --config TOML file (same name, no dashes).");
      return [a, config, steps, sub = &sub, rank, alpha, targets]() {
        if (!config->empty()) {
          nlcli::apply_config_file(*sub, *config);
          a->config_file = std::filesystem::absolute(*config).string();
        }
        a->options_record = nlcli::merged_option_values(*sub);
        a->rank_given = rank->count() > 0;
        a->alpha_given = alpha->count() > 0;
        a->targets_given = targets->count() > 0;
        return run_train(*a, *steps);
      };
    });

}  // namespace
