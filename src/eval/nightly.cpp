// The nightly job's steps (see nightly.h): each one skipped when its outputs already exist,
// so a killed job picks up where it was.
#include "nightlora/eval/nightly.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>

#include <nlohmann/json.hpp>

#include "nightlora/eval/heldout_loss.h"
#include "nightlora/eval/nightly_user_data.h"
#include "nightlora/host/adapter_io.h"
#include "nightlora/host/checkpoint.h"
#include "nightlora/host/lora.h"
#include "nightlora/host/mezo.h"
#include "nightlora/job/atomic_file.h"
#include "nightlora/job/checkpoint_store.h"
#include "nightlora/job/exit_codes.h"
#include "nightlora/job/file_ops.h"
#include "nightlora/job/folder_lock.h"
#include "nightlora/modelio/model.h"
#include "nightlora/util/error.h"
#include "nightly_child.h"
#include "nightly_runs.h"
#include "nightly_summary.h"
#include "nightly_task.h"

namespace nl {

namespace fs = std::filesystem;
using json = nlohmann::json;

const char* nightly_outcome_name(NightlyOutcome o) {
  switch (o) {
    case NightlyOutcome::Published: return "published";
    case NightlyOutcome::KeptCurrent: return "kept-current";
    case NightlyOutcome::Interrupted: return "interrupted";
  }
  return "?";
}

int nightly_exit_code(const NightlyResult& r) {
  if (r.outcome != NightlyOutcome::Interrupted) return exit_code::kFinished;
  return r.stop_signal != 0 ? exit_code::signal_code(r.stop_signal) : exit_code::kStopped;
}

namespace {

json read_json(const fs::path& p) {
  json j = json::parse(read_file(p.string()), nullptr, false);
  if (j.is_discarded() || !j.is_object())
    fail(p.string(), "is not the JSON object a nightly job writes", "run `nightlora nightly --reset` to start afresh");
  return j;
}

void write_json(const fs::path& p, const json& j) { write_file_atomic(p.string(), j.dump(1) + "\n"); }

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

const char* signal_name(int sig) {
  switch (sig) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP";
    default: return "a signal";
  }
}

// What makes a run what it is: a run started with other settings is not continued.
json run_settings(const NightlyOptions& o, const std::string& task) {
  return {{"task", task},
          {"model", fs::absolute(o.model).string()},
          {"user_data", fs::absolute(o.user_data).string()},
          {"user", o.user},
          {"k_retrieved", o.k_retrieved},
          {"timestamp_key", o.timestamp_key},
          {"holdout", o.holdout},
          {"holdout_share", o.holdout_share},
          {"max_train_items", o.max_train_items},
          {"max_heldout", o.max_heldout},
          {"budget_sec", o.budget_sec},
          {"from_current", o.from_current},
          {"method", o.method},
          {"mezo_eps", o.mezo_eps},
          {"iters", o.iters},
          {"epochs", o.epochs},
          {"batch", o.batch},
          {"rank", o.rank},
          {"alpha", o.alpha},
          {"lr", o.lr},
          {"seq_len", o.seq_len},
          {"seed", o.seed},
          {"save_every", o.save_every},
          {"train_args", o.extra_train_args}};
}

// The arguments of the training child (fixed when the run starts, reused when it continues).
std::vector<std::string> train_arguments(const NightlyOptions& o, const fs::path& run, const std::string& adapter) {
  std::vector<std::string> a = {"train",       "--model",    o.model,
                                "--data",      (run / "train.jsonl").string(),
                                "--out",       (run / "train").string(),
                                "--background", "--method",  o.method,
                                "--batch",     std::to_string(o.batch),
                                "--rank",      std::to_string(o.rank),
                                "--alpha",     fmt("%.17g", o.alpha),
                                "--lr",        fmt("%.17g", o.lr),
                                "--seq-len",   std::to_string(o.seq_len),
                                "--seed",      std::to_string(o.seed),
                                "--threads",   std::to_string(o.threads),
                                "--save-every", std::to_string(o.save_every),
                                "--save-every-sec", "60",
                                "--schedule",  "constant"};
  if (o.iters > 0) a.insert(a.end(), {"--iters", std::to_string(o.iters)});
  else a.insert(a.end(), {"--epochs", std::to_string(o.epochs)});
  if (o.method == "mezo") a.insert(a.end(), {"--mezo-eps", fmt("%.17g", o.mezo_eps)});
  if (!adapter.empty()) a.insert(a.end(), {"--adapter", adapter});
  a.insert(a.end(), o.extra_train_args.begin(), o.extra_train_args.end());
  return a;
}

struct CheckpointInfo {
  int64_t step = 0;
  double elapsed_s = 0;
};
std::optional<CheckpointInfo> newest_checkpoint(const fs::path& train_dir, Checkpoint* full = nullptr) {
  const fs::path dir = train_dir / "checkpoints";
  std::error_code ec;
  if (!fs::exists(dir, ec)) return std::nullopt;
  CheckpointStore store(dir.string());
  std::optional<LoadedCheckpoint> l = store.load_latest();
  if (!l) return std::nullopt;
  if (full) {
    *full = decode_checkpoint(l->payload, l->path);
    return CheckpointInfo{full->state.step, full->meta.progress.value("elapsed_s", 0.0)};
  }
  // The step alone: the state's bytes are checked (read_train_state_layout) but not decoded,
  // so no copy of the adapter and its moments is made next to the file's bytes.
  const Checkpoint header = decode_checkpoint_header(l->payload, l->path);
  const TrainStateLayout layout = read_train_state_layout(checkpoint_state_bytes(l->payload, l->path), l->path);
  return CheckpointInfo{layout.step, header.meta.progress.value("elapsed_s", 0.0)};
}

// Training steps planned: train's run.json (total_steps, written atomically as each session
// starts), else the "total" of the log's step rows; 0 when unknown. The log is not enough
// alone: it is never synced, and a power cut that kept the last checkpoint but lost the log
// would leave a finished run that never counts as finished.
int64_t planned_steps(const fs::path& train_dir) {
  std::error_code ec;
  if (fs::exists(train_dir / "run.json", ec)) {
    const json rec = json::parse(read_file((train_dir / "run.json").string()), nullptr, false);
    if (rec.is_object() && rec.value("total_steps", int64_t{0}) > 0) return rec["total_steps"].get<int64_t>();
  }
  const fs::path log = train_dir / "log.jsonl";
  if (!fs::exists(log, ec)) return 0;
  int64_t total = 0;
  for_each_line(read_file(log.string()), [&](const std::string& line, int64_t) {
    json row = json::parse(line, nullptr, false);
    if (row.is_object() && row.value("type", "") == "train") total = row.value("total", int64_t{0});
  });
  return total;
}

// The held-out items as training reads them; an item the loader rejects is left out of both
// adapters' scores alike (counted).
Dataset load_heldout(const fs::path& path, const Tokenizer& tok, int64_t seq_len, int64_t& n_skipped) {
  DataOptions dopt;
  dopt.max_tokens = seq_len;
  Dataset d;
  d.source = path.string();
  for_each_line(read_file(path.string()), [&](const std::string& line, int64_t line_no) {
    try {
      Dataset one = parse_jsonl_dataset(line, path.string() + ":" + std::to_string(line_no), tok, dopt);
      for (Example& e : one.examples) d.examples.push_back(std::move(e));
    } catch (const Error&) {
      ++n_skipped;
    }
  });
  return d;
}

json losses_json(const HeldoutLoss& h) {
  json per = json::array();
  for (const ExampleLoss& e : h.examples) per.push_back({{"loss_sum", std::isfinite(e.loss_sum) ? json(e.loss_sum) : json("non-finite")}, {"supervised", e.n_supervised}});
  return per;
}
std::vector<ExampleLoss> losses_from_json(const json& per) {
  std::vector<ExampleLoss> v;
  for (const json& e : per) {
    ExampleLoss l;
    l.loss_sum = e.at("loss_sum").is_number() ? e.at("loss_sum").get<double>() : NAN;
    l.n_supervised = e.at("supervised").get<int64_t>();
    v.push_back(l);
  }
  return v;
}

class NightlyRun {
 public:
  NightlyRun(const NightlyOptions& o, const NightlyLog& log) : o_(o), log_(log) {}
  NightlyResult run();

 private:
  int stop() const { return o_.stop_signal ? o_.stop_signal() : 0; }
  NightlyResult interrupted(int sig, const std::string& where);
  fs::path pick_run(const json& settings);
  bool train(const json& run_info, NightlyResult& res);  // false: interrupted
  NightlyResult run_steps(NightlyTask& task, std::unique_ptr<Model>& model, const json& settings);

  const NightlyOptions& o_;
  const NightlyLog& log_;
  fs::path out_, run_;
};

NightlyResult NightlyRun::interrupted(int sig, const std::string& where) {
  NightlyResult r;
  r.outcome = NightlyOutcome::Interrupted;
  r.stop_signal = sig;
  r.run_dir = run_.string();
  r.reason = where;
  log_(std::string(sig ? std::string("stopped by ") + signal_name(sig) : std::string("stopped")) + ": " + where +
       "; the same command continues run " + run_.filename().string());
  return r;
}

fs::path NightlyRun::pick_run(const json& settings) {
  const fs::path runs_dir = out_ / "runs";
  make_dirs(runs_dir.string());
  const std::vector<fs::path> runs = nightly_runs(out_);
  int last = runs.empty() ? 0 : std::stoi(runs.back().filename().string());
  if (!runs.empty() && !run_sealed(runs.back())) {
    const fs::path& r = runs.back();
    std::string why;
    if (o_.reset) {
      why = "abandoned on purpose (--reset)";
    } else if (run_failures(r) >= o_.max_attempts) {
      const json f = read_json(r / "failures.json");
      why = "failed " + std::to_string(run_failures(r)) + " time(s) (the most --max-attempts allows); last error: " +
            f.value("last_error", std::string("?"));
    } else if (fs::exists(r / "run.json")) {
      const std::string change = settings_change(read_json(r / "run.json").value("settings", json::object()), settings);
      if (!change.empty()) why = "its settings differ from this command's: " + change;
    }
    if (why.empty()) {
      log_("continuing run " + r.string() + (run_failures(r) > 0 ? " (attempt " + std::to_string(run_failures(r) + 1) + " of " +
                                                                        std::to_string(o_.max_attempts) + ")"
                                                                  : std::string()));
      return r;
    }
    abandon_run(r, why);
    log_("run " + r.filename().string() + " abandoned: " + why + "; starting a fresh run");
  } else if (o_.reset) {
    log_("--reset: no unfinished run to abandon");
  }
  if (last >= 9999) fail(runs_dir.string(), "holds 9999 runs already", "archive old runs");
  char buf[16];
  std::snprintf(buf, sizeof buf, "%04d", last + 1);
  make_dirs((runs_dir / buf).string());
  return runs_dir / buf;
}

bool NightlyRun::train(const json& run_info, NightlyResult& res) {
  const fs::path train_dir = run_ / "train";
  std::vector<std::string> args = run_info.at("train_args").get<std::vector<std::string>>();
  const double budget = run_info.at("settings").value("budget_sec", 0.0);
  bool budget_exhausted = false;
  double left = 0;
  if (budget > 0) {
    const std::optional<CheckpointInfo> ck = newest_checkpoint(train_dir);
    left = budget - (ck ? ck->elapsed_s : 0.0);
    // A remainder shorter than loading the model takes is spent: a training process started
    // for it would either train nothing or, where its first budget check comes within a
    // microsecond, take one whole step past the budget.
    constexpr double kShortestSlice_s = 0.05;
    if (left < kShortestSlice_s) {
      budget_exhausted = true;
      log_("training budget used up (" + fmt("%.3f", std::max(0.0, left)) + " s of " + fmt("%g", budget) +
           " s left): no training this run");
    } else {
      args.insert(args.end(), {"--max-wall", fmt("%.6f", left)});
    }
  }
  bool diverged = false;
  if (!budget_exhausted) {
    log_("training in a child process; its output: " + (run_ / "train.out").string());
    const auto t0 = std::chrono::steady_clock::now();
    const ChildExit ex = run_child(o_.exe, args, (run_ / "train.out").string(), o_.stop_signal);
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const std::optional<CheckpointInfo> ck = newest_checkpoint(train_dir);
    const std::string at = ck ? "training saved at step " + std::to_string(ck->step) : std::string("training had saved no step yet");
    if (const int sig = stop(); sig != 0) {
      res = interrupted(sig, at);
      return false;
    }
    if (!ex.exited)
      fail((run_ / "train.out").string(), "the training process was killed by signal " + std::to_string(ex.code) + " (" + at + ")",
           "run the same command again to continue (failure " + std::to_string(run_failures(run_) + 1) + " of at most " +
               std::to_string(o_.max_attempts) + ")");
    if (ex.code == exit_code::kDiverged) {
      diverged = true;
    } else if (ex.code >= 128) {  // stopped by a signal sent to it alone: it saved, continue later
      res = interrupted(0, at + " (training was stopped by signal " + std::to_string(ex.code - 128) + ")");
      return false;
    } else if (ex.code != exit_code::kFinished && ex.code != exit_code::kStopped) {
      fail((run_ / "train.out").string(), "training failed (exit code " + std::to_string(ex.code) + "):\n" +
                                              file_tail((run_ / "train.out").string()),
           "the next job retries this run (at most " + std::to_string(o_.max_attempts) + " failures), then starts a fresh one");
    }
    budget_exhausted = !diverged && budget > 0 && (wall >= left * 0.99 || (ck && ck->elapsed_s >= budget));
  }
  const std::optional<CheckpointInfo> ck = newest_checkpoint(train_dir);
  const int64_t total = planned_steps(train_dir);
  const bool finished = ck && fs::exists(train_dir / "adapter_model.safetensors") && total > 0 && ck->step >= total;
  if (!diverged && !finished && !budget_exhausted) {
    // train stopped by its own conditions (window, power, --max-steps): the run goes on later.
    res = interrupted(0, "training stopped by its conditions at step " + std::to_string(ck ? ck->step : 0) + " of " +
                             std::to_string(total));
    return false;
  }
  write_json(run_ / "trained.json", {{"steps", ck ? ck->step : 0},
                                     {"total", total},
                                     {"elapsed_s", ck ? ck->elapsed_s : 0.0},
                                     {"finished", finished},
                                     {"diverged", diverged},
                                     {"budget_exhausted", budget_exhausted}});
  return true;
}

NightlyResult NightlyRun::run_steps(NightlyTask& task, std::unique_ptr<Model>& model, const json& settings) {
  NightlyResult res;
  res.run_dir = run_.string();
  // 1. data (run.json, written last, marks it complete).
  json run_info;
  if (fs::exists(run_ / "run.json")) {
    run_info = read_json(run_ / "run.json");
  } else {
    log_("run " + run_.string() + " (" + task.name() + ")");
    const json data = task.write(run_, log_);
    // --from-current continues the adapter published when the run started (a stable folder).
    const std::string start_adapter = o_.from_current ? nightly_current_adapter(out_.string()) : "";
    run_info = {{"task", task.name()},
                {"settings", settings},
                {"data", data},
                {"start_adapter", start_adapter},
                {"threads", o_.threads},
                {"report", o_.report},
                {"train_args", train_arguments(o_, run_, start_adapter)}};
    write_json(run_ / "run.json", run_info);
  }
  if (const int sig = stop(); sig != 0) return interrupted(sig, "before training");

  // 2. train (the child resumes from its checkpoints by itself). The model is not kept in
  // memory meanwhile: on a small device it should not be there twice.
  if (!fs::exists(run_ / "trained.json")) {
    model.reset();
    if (!train(run_info, res)) return res;
  }
  const json trained = read_json(run_ / "trained.json");
  res.train_steps = trained.value("steps", int64_t{0});
  res.train_total = trained.value("total", int64_t{0});
  res.train_elapsed_s = trained.value("elapsed_s", 0.0);
  res.budget_exhausted = trained.value("budget_exhausted", false);
  const bool diverged = trained.value("diverged", false);
  if (!model) model = Model::load(o_.model);
  if (const int sig = stop(); sig != 0) return interrupted(sig, "after training, before the evaluation");

  // 3. candidate: the newest checkpoint's adapter (none when training diverged before one).
  const fs::path cand_dir = run_ / "candidate";
  const fs::path train_dir = run_ / "train";
  if (!fs::exists(cand_dir / "adapter_config.json")) {
    Checkpoint ck;
    if (newest_checkpoint(train_dir, &ck)) {
      make_dirs(cand_dir.string());
      if (o_.gguf) save_adapter_gguf(ck.state.adapter, *model, (cand_dir / "adapter.gguf").string());
      save_adapter_peft(ck.state.adapter, *model, cand_dir.string());  // adapter_config.json last: the marker
    } else if (!diverged && res.train_steps > 0) {  // 0 steps: the budget was spent before training began
      fail(train_dir.string(), "training left no checkpoint", "see " + (run_ / "train.out").string());
    }
  }
  const bool have_candidate = fs::exists(cand_dir / "adapter_config.json");

  // 4. eval, on the held-out items. eval.json holds the scores, so they are taken once.
  const std::string current_at_eval = nightly_current_adapter(out_.string());
  if (!fs::exists(run_ / "eval.json")) {
    json ev = {{"current_adapter", current_at_eval}, {"have_candidate", have_candidate}};
    int64_t n_skipped = 0;
    const Dataset held =
        load_heldout(run_ / "heldout.jsonl", *model->tokenizer, run_info.at("settings").value("seq_len", int64_t{512}), n_skipped);
    ev["heldout_items"] = held.examples.size();
    ev["heldout_skipped"] = n_skipped;
    // A diverged run is not published whatever it scores: no need to score it.
    if (have_candidate && !diverged && !held.examples.empty()) {
      log_("scoring the candidate and the " + std::string(current_at_eval.empty() ? "base model" : "current adapter") +
           " on " + std::to_string(held.examples.size()) + " held-out items");
      const LoraAdapter cand = load_adapter(cand_dir.string(), *model);
      std::optional<LoraAdapter> cur;
      if (!current_at_eval.empty()) cur = load_adapter(current_at_eval, *model);
      const int threads = run_info.value("threads", 0);
      ev["candidate_finite"] = cand.all_finite();
      ev["candidate_losses"] = losses_json(heldout_loss(*model, &cand, held, threads));
      ev["current_losses"] = losses_json(heldout_loss(*model, cur ? &*cur : nullptr, held, threads));
      json detail;
      if (std::optional<TaskMetric> m = task.metric(*model, cand, cur ? &*cur : nullptr, run_, run_info, detail)) {
        ev["metric"] = {{"name", m->name}, {"candidate", m->candidate}, {"current", m->current}};
        ev["metric_detail"] = detail;
      }
    }
    write_json(run_ / "eval.json", ev);
  }
  const json ev = read_json(run_ / "eval.json");
  res.current_before = ev.value("current_adapter", std::string());

  // 5. decide, publish (repeatable: a job killed here links the same files again).
  GateInput gi;
  // No candidate: training diverged before its first checkpoint, or never began (the gate
  // then says it ran 0 steps).
  gi.diverged = diverged || (!ev.value("have_candidate", false) && res.train_steps > 0);
  gi.candidate_weights_finite = ev.value("candidate_finite", true);
  gi.train_steps = res.train_steps;
  if (ev.contains("candidate_losses")) {
    gi.candidate = losses_from_json(ev["candidate_losses"]);
    gi.current = losses_from_json(ev["current_losses"]);
  }
  if (ev.contains("metric")) gi.metric = TaskMetric{ev["metric"]["name"], ev["metric"]["candidate"], ev["metric"]["current"]};
  const PublishDecision gd = nightly_gate(gi, o_.gate);
  res.reason = gd.reason;
  res.candidate_loss = gd.candidate_loss;
  res.current_loss = gd.current_loss;
  if (gd.publish) {
    nightly_publish(out_.string(), run_.filename().string(), cand_dir.string());
    res.outcome = NightlyOutcome::Published;
  } else {
    res.outcome = NightlyOutcome::KeptCurrent;
  }
  res.current_after = nightly_current_adapter(out_.string());
  json decision = {{"outcome", nightly_outcome_name(res.outcome)},
                   {"reason", gd.reason},
                   {"rule", nightly_gate_rule(o_.gate)},
                   {"task", task.name()},
                   {"heldout_items", gi.candidate.size()},
                   {"min_heldout", o_.gate.min_heldout},
                   {"train_items", run_info.at("data").value("train_items", int64_t{0})},
                   {"candidate", {{"loss", gd.candidate_loss}, {"finite", gi.candidate_weights_finite}}},
                   {"current", {{"loss", gd.current_loss}, {"adapter", res.current_before}}},
                   {"current_before", res.current_before},
                   {"current_after", res.current_after},
                   {"train_steps", res.train_steps},
                   {"train_total", res.train_total},
                   {"train_elapsed_s", res.train_elapsed_s},
                   {"budget_exhausted", res.budget_exhausted},
                   {"diverged", gi.diverged}};
  if (gd.loss_comparison) {
    const PairedComparison& c = *gd.loss_comparison;
    decision["loss_improvement"] = {{"mean", c.mean_diff},       {"ci_low", c.ci_low},         {"ci_high", c.ci_high},
                                    {"confidence", c.confidence}, {"resamples", c.resamples},   {"items_better", c.n_a_better},
                                    {"items_worse", c.n_b_better}};
  }
  if (gi.metric) {
    decision["metric"] = ev["metric"];
    decision["candidate"][gi.metric->name] = gi.metric->candidate;
    decision["current"][gi.metric->name] = gi.metric->current;
  }

  // 6. seal: free what is no longer needed, then the report, summary and decision (the
  // decision seals the run).
  std::error_code ec;
  free_run_training(run_);
  prune_job(out_, o_.keep_adapters);
  const StorageUse use = measure_storage(out_);
  decision["storage"] = storage_json(use);
  std::string report_note;
  if (run_info.value("report", true) && !fs::exists(run_ / "report.out")) {
    // `nightlora report` belongs to another part of the tool; it is used when present.
    const ChildExit probe = run_child(o_.exe, {"report", "--help"}, (run_ / "report.probe").string());
    fs::remove(run_ / "report.probe", ec);
    if (probe.exited && probe.code == 0) {
      const ChildExit rep = run_child(o_.exe, {"report", train_dir.string(), "--out", (run_ / "report.html").string()},
                                      (run_ / "report.out").string());
      report_note = rep.exited && rep.code == 0 ? "[report.html](report.html)"
                                                : "`nightlora report` failed, see " + (run_ / "report.out").string();
    } else {
      report_note = "`nightlora report` is not available in this build";
    }
  }
  write_file_atomic((run_ / "summary.md").string(), nightly_summary_markdown(res, run_info, decision, storage_line(use), report_note));
  write_json(run_ / "decision.json", decision);
  log_(std::string("decision: ") + nightly_outcome_name(res.outcome) + ": " + gd.reason + "; summary: " +
       (run_ / "summary.md").string());
  log_("storage: " + storage_line(use));
  return res;
}

NightlyResult NightlyRun::run() {
  // Options and inputs first: a typo fails before OUT is touched.
  parse_train_method(o_.method);
  if (o_.budget_sec < 0) fail("--budget-sec", "must not be negative");
  if (o_.max_attempts < 1) fail("--max-attempts", "must be at least 1");
  if (o_.keep_adapters < 1) fail("--keep-adapters", "must be at least 1 (the current adapter is always kept)");
  if (o_.exe.empty() || ::access(o_.exe.c_str(), X_OK) != 0)
    fail(o_.exe, "the nightlora executable to run training with is not there");
  std::error_code ec;
  if (!fs::exists(o_.model, ec)) fail(o_.model, "--model does not exist");
  std::unique_ptr<NightlyTask> task = make_nightly_task(o_);
  std::unique_ptr<Model> model = Model::load(o_.model);
  task->load(o_, *model);
  const json settings = run_settings(o_, task->name());

  out_ = o_.out;
  make_dirs(out_.string());
  // Inherited by the training child: a new job waits (a while) for an orphaned child to stop.
  FolderLock lock(out_.string(), "nightly job", 60.0, true);
  prune_job(out_, o_.keep_adapters);  // what a job killed while sealing left
  run_ = pick_run(settings);
  try {
    try {
      return run_steps(*task, model, settings);
    } catch (const nlohmann::json::exception& e) {
      // The job's own state files are written atomically; one that does not read back was
      // damaged from outside. Said as bad input, so the run is retried, then abandoned.
      fail(run_.string(), std::string("a state file of this run is damaged (") + e.what() + ")",
           "`nightly --reset` abandons the run and the next night starts afresh");
    }
  } catch (const FolderBusy&) {
    throw;
  } catch (const Error& e) {
    record_run_failure(run_, e.what());
    throw;
  }
}

}  // namespace

NightlyResult run_nightly(const NightlyOptions& opt, const NightlyLog& log) { return NightlyRun(opt, log).run(); }

}  // namespace nl
