// `nightlora nightly --model M --user-data DIR --out OUT [--user ID] ...`: one night of
// personalization for one user (see nightlora/eval/nightly.h): build the user's data, train in
// the background (a `nightlora train --background` child of this executable, resumable), judge
// the new adapter against the current one on the user's latest items, publish it atomically
// as OUT/current only if it is not worse, and write a summary. Run it again after a kill (or
// the next night) with the same command.
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "command.h"
#include "nightlora/eval/nightly.h"
#include "nightlora/util/error.h"

namespace {

std::string self_exe() {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) nl::fail("/proc/self/exe", "cannot find this program's own executable to run training with");
  return std::string(buf, static_cast<size_t>(n));
}

int run(const nl::NightlyOptions& opt) {
  nl::NightlyOptions o = opt;
  o.exe = self_exe();
  const nl::NightlyResult r = nl::run_nightly(o, [](const std::string& line) {
    std::printf("nightly: %s\n", line.c_str());
    std::fflush(stdout);
  });
  // 75 (EX_TEMPFAIL): stopped before the end, run again to continue.
  return r.outcome == nl::NightlyOutcome::Interrupted ? 75 : 0;
}

nlcli::Register reg_nightly(
    "nightly",
    "One nightly personalization run for a user: build data, train in the background (resumable), evaluate, "
    "publish OUT/current only if not worse",
    [](CLI::App& sub) -> nlcli::Run {
      auto o = std::make_shared<nl::NightlyOptions>();
      sub.add_option("-m,--model", o->model, "base model (GGUF file or Hugging Face folder)")->required();
      sub.add_option("--user-data", o->user_data, "the user's LaMP-2 data: a folder with questions.json, or the file")
          ->required();
      sub.add_option("-o,--out", o->out, "the job's folder (runs/, adapters/, current -> the published adapter)")
          ->required();
      sub.add_option("--user", o->user, "the user id (needed when the data holds several users)");
      sub.add_option("--retrieve", o->k_retrieved, "BM25-retrieved earlier profile items per prompt")
          ->capture_default_str()->check(CLI::NonNegativeNumber);
      sub.add_option("--holdout", o->holdout, "latest profile items held out for the decision (0: 20%)")
          ->capture_default_str()->check(CLI::NonNegativeNumber);
      sub.add_option("--budget-sec", o->budget_sec, "training wall-time budget of the run, across restarts (0: none)")
          ->capture_default_str()->check(CLI::NonNegativeNumber);
      sub.add_flag("--from-current", o->from_current, "continue training the current adapter instead of a new one");
      sub.add_option("--method", o->method, "first-order or mezo (forward-only)")->capture_default_str();
      sub.add_option("--mezo-eps", o->mezo_eps, "MeZO perturbation size")->capture_default_str();
      sub.add_option("--iters", o->iters, "training steps (0: --epochs)")->capture_default_str();
      sub.add_option("--epochs", o->epochs, "passes over the user's examples (when --iters is 0)")
          ->capture_default_str();
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
      return [o]() { return run(*o); };
    });

}  // namespace
