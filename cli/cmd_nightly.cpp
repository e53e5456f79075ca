// `nightlora nightly --model M --user-data DIR --out OUT ...`: one night of personalization on
// the user's own data (see nightlora/eval/nightly.h and docs/PERSONALIZATION.md): build the
// data, train in the background (a `nightlora train --background` child of this executable,
// resumable), judge the new adapter against the current one on the user's latest items,
// publish it atomically as OUT/current only if it is really better, and write a summary. Run it
// again after a kill (or the next night) with the same command.
// `nightlora nightly status OUT [--json]`: where the job stands.
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "command.h"
#include "config_file.h"
#include "nightlora/eval/nightly.h"
#include "nightlora/eval/nightly_status.h"
#include "nightlora/job/exit_codes.h"
#include "nightlora/job/stop_signals.h"
#include "nightlora/util/error.h"

namespace {

std::string self_exe() {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) nl::fail("/proc/self/exe", "cannot find this program's own executable to run training with");
  return std::string(buf, static_cast<size_t>(n));
}

struct Args {
  nl::NightlyOptions opt;
  std::string config;
  std::string status_out;
  bool status_json = false;
};

int run_nightly_job(const nl::NightlyOptions& opt) {
  for (const char* name : {"--model", "--user-data", "--out"}) {
    const std::string& v = std::string(name) == "--model" ? opt.model : std::string(name) == "--out" ? opt.out : opt.user_data;
    if (v.empty())
      nl::fail(std::string("nightly ") + name, "is required",
               "give it on the command line or as `" + std::string(name + 2) + " = \"...\"` in the --config file");
  }
  nl::NightlyOptions o = opt;
  o.exe = self_exe();
  // SIGINT/SIGTERM/SIGHUP: the training child checkpoints and stops, the job says where and
  // exits 128+N; the same command continues.
  nl::StopSignals signals;
  o.stop_signal = [&signals]() { return signals.signal(); };
  // Errors go to main, which maps them to exit codes (nl::FolderBusy: 4, busy).
  const nl::NightlyResult r = nl::run_nightly(o, [](const std::string& line) {
    std::printf("nightly: %s\n", line.c_str());
    std::fflush(stdout);
  });
  return nl::nightly_exit_code(r);
}

int status(const std::string& out, bool as_json) {
  const nlohmann::json s = nl::nightly_status(out);
  if (as_json) std::printf("%s\n", s.dump(1).c_str());
  else std::printf("%s", nl::nightly_status_text(s).c_str());
  return 0;
}

nlcli::Register reg_nightly(
    "nightly",
    "One night of personalization on the user's own data: train in the background (resumable), score on the "
    "latest items, publish OUT/current only if really better. `nightly status OUT` shows where a job stands",
    [](CLI::App& sub) -> nlcli::Run {
      auto a = std::make_shared<Args>();
      nl::NightlyOptions* o = &a->opt;
      nlcli::add_config_option(sub, a->config);
      sub.add_option("-m,--model", o->model, "base model (GGUF file or Hugging Face folder)");
      sub.add_option("--user-data", o->user_data,
                     "the app's data: a folder of *.jsonl files (text, prompt/completion or messages lines) or one "
                     "file; for --task lamp2 a LaMP-2 questions.json or its folder");
      sub.add_option("-o,--out", o->out, "the job's folder (runs/, adapters/, current -> the published adapter)");
      sub.add_option("--task", o->task, "generic (the app's JSONL), lamp2, or auto (lamp2 when the data is a questions.json)")
          ->capture_default_str();
      sub.add_option("--timestamp-key", o->timestamp_key, "key of a line's time (Unix seconds or ISO 8601)")
          ->capture_default_str();
      sub.add_option("--holdout", o->holdout, "latest items held out for the decision (0: --holdout-share, at least --min-heldout)")
          ->capture_default_str()->check(CLI::NonNegativeNumber);
      sub.add_option("--holdout-share", o->holdout_share, "share of the items held out when --holdout is 0")
          ->capture_default_str();
      sub.add_option("--max-heldout", o->max_heldout, "at most this many items held out by --holdout-share")
          ->capture_default_str()->check(CLI::PositiveNumber);
      sub.add_option("--max-train-items", o->max_train_items,
                     "train on at most the newest N items before the held-out ones (0: all)")
          ->capture_default_str()->check(CLI::NonNegativeNumber);
      sub.add_option("--min-heldout", o->gate.min_heldout, "fewer held-out items than this decide nothing (nothing is published)")
          ->capture_default_str()->check(CLI::PositiveNumber);
      sub.add_option("--min-steps", o->gate.min_steps, "a run that trained fewer steps is not published")
          ->capture_default_str()->check(CLI::NonNegativeNumber);
      sub.add_option("--min-improvement", o->gate.min_improvement,
                     "the held-out loss must improve by more than this (nats per token) at the confidence level")
          ->capture_default_str();
      sub.add_option("--confidence", o->gate.confidence, "confidence level of the paired bootstrap")
          ->capture_default_str()->check(CLI::Range(0.5, 0.9999));
      sub.add_option("--max-attempts", o->max_attempts, "failures of one run before it is abandoned for a fresh one")
          ->capture_default_str()->check(CLI::PositiveNumber);
      sub.add_option("--keep-adapters", o->keep_adapters, "published adapters kept (the newest; the current one always)")
          ->capture_default_str()->check(CLI::PositiveNumber);
      sub.add_flag("--reset", o->reset, "abandon the unfinished run and start a fresh one");
      sub.add_flag("--gguf", o->gguf, "also write adapter.gguf (llama.cpp LoRA) next to the PEFT files");
      sub.add_option("--user", o->user, "lamp2: the user id (needed when the data holds several users)");
      sub.add_option("--retrieve", o->k_retrieved, "lamp2: BM25-retrieved earlier profile items per prompt")
          ->capture_default_str()->check(CLI::NonNegativeNumber);
      sub.add_option("--budget-sec", o->budget_sec, "training wall-time budget of the run, across restarts (0: none)")
          ->capture_default_str()->check(CLI::NonNegativeNumber);
      sub.add_flag("!--fresh-adapter", o->from_current,
                   "start each run from a new adapter instead of training on from the current one");
      sub.add_option("--method", o->method, "first-order or mezo (forward-only)")->capture_default_str();
      sub.add_option("--mezo-eps", o->mezo_eps, "MeZO perturbation size")->capture_default_str();
      sub.add_option("--iters", o->iters, "training steps (0: --epochs)")->capture_default_str();
      sub.add_option("--epochs", o->epochs, "passes over the training items (when --iters is 0)")->capture_default_str();
      sub.add_option("--batch", o->batch, "examples per step")->capture_default_str();
      sub.add_option("--rank", o->rank, "LoRA rank")->capture_default_str();
      sub.add_option("--alpha", o->alpha, "LoRA alpha")->capture_default_str();
      sub.add_option("--lr", o->lr, "learning rate (constant)")->capture_default_str();
      sub.add_option("--seq-len", o->seq_len, "maximum tokens per example")->capture_default_str();
      sub.add_option("--seed", o->seed, "seed of the data order (and MeZO's directions)")->capture_default_str();
      sub.add_option("--save-every", o->save_every, "checkpoint every N training steps")->capture_default_str();
      sub.add_option("-t,--threads", o->threads, "threads (0 = all cores)")->check(CLI::NonNegativeNumber);
      sub.add_flag("!--no-report", o->report, "do not call `nightlora report` on the run");
      sub.add_option("train-args", o->extra_train_args,
                     "after --: more `nightlora train` options, e.g. -- --window 23:00-07:00 --require-power "
                     "--temp-ceiling 45");
      CLI::App* st = sub.add_subcommand("status", "Where a nightly job stands: current adapter, last decisions, next run, storage");
      st->add_option("out", a->status_out, "the job's folder (--out of `nightlora nightly`)")->required();
      st->add_flag("--json", a->status_json, "as JSON");
      sub.footer(nl::exit_code::table() +
                 "\nnightly: a night that reached its decision exits 0, whether it published or kept the current "
                 "adapter (a diverged training included: decision.json says why); a failed run exits 1 and is retried "
                 "by the next job, at most --max-attempts times.\nEvery option may also be a key of the --config TOML "
                 "file (same name, no dashes; train-args = [\"--window\", \"23:00-07:00\"] for the options after --).");
      return [a, st, sub = &sub]() {
        if (st->parsed()) return status(a->status_out, a->status_json);
        if (!a->config.empty()) nlcli::apply_config_file(*sub, a->config);
        return run_nightly_job(a->opt);
      };
    });

}  // namespace
