// The nightly job's steps (see nightly.h): each one skipped when its outputs already exist,
// so a killed job picks up where it was.
#include "nightlora/eval/nightly.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <thread>

#include <nlohmann/json.hpp>

#include "nightlora/eval/lamp2_eval.h"
#include "nightlora/host/adapter_io.h"
#include "nightlora/host/checkpoint.h"
#include "nightlora/host/lora.h"
#include "nightlora/host/mezo.h"
#include "nightlora/job/atomic_file.h"
#include "nightlora/job/checkpoint_store.h"
#include "nightlora/modelio/model.h"
#include "nightlora/util/error.h"
#include "nightly_child.h"

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

namespace {

// OUT/.lock, held for the job's lifetime; deliberately inherited by the training child, so the
// lock is free only when both are gone.
class JobLock {
 public:
  explicit JobLock(const fs::path& path) {
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT, 0644);
    if (fd_ < 0) fail(path.string(), "cannot open the job's lock file");
    // A job killed a moment ago may leave a training child that is still writing its last
    // checkpoint: wait for it a while rather than fail at once.
    for (int i = 0; ::flock(fd_, LOCK_EX | LOCK_NB) != 0; ++i) {
      if (i >= 600) {
        ::close(fd_);
        fail(path.string(), "another nightly job (or its training process) is using this folder",
             "wait for it to finish, or stop it");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  ~JobLock() { ::close(fd_); }
  JobLock(const JobLock&) = delete;
  JobLock& operator=(const JobLock&) = delete;

 private:
  int fd_ = -1;
};

json metrics_json(const ClassificationMetrics& m) {
  return {{"n", m.n}, {"correct", m.n_correct}, {"unparsed", m.n_unparsed}, {"accuracy", m.accuracy},
          {"macro_f1", m.macro_f1}};
}

ClassificationMetrics metrics_from_json(const json& j) {
  ClassificationMetrics m;
  m.n = j.at("n").get<int64_t>();
  m.n_correct = j.at("correct").get<int64_t>();
  m.n_unparsed = j.at("unparsed").get<int64_t>();
  m.accuracy = j.at("accuracy").get<double>();
  m.macro_f1 = j.at("macro_f1").get<double>();
  return m;
}

json read_json(const fs::path& p) {
  const std::string text = read_file(p.string());
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    fail(p.string(), "is not the JSON object a nightly job writes", "remove the run folder to redo it");
  return j;
}

void write_json(const fs::path& p, const json& j) { write_file_atomic(p.string(), j.dump(1) + "\n"); }

// The newest run folder (runs/NNNN) when it is unfinished, else a new one.
fs::path pick_run_dir(const fs::path& out, bool& continuing) {
  const fs::path runs = out / "runs";
  fs::create_directories(runs);
  int last = 0;
  for (const auto& e : fs::directory_iterator(runs)) {
    const std::string name = e.path().filename().string();
    if (name.size() == 4 && std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; }))
      last = std::max(last, std::stoi(name));
  }
  char buf[16];
  if (last > 0) {
    std::snprintf(buf, sizeof buf, "%04d", last);
    if (!fs::exists(runs / buf / "decision.json")) {
      continuing = true;
      return runs / buf;
    }
  }
  if (last >= 9999) fail(runs.string(), "holds 9999 runs already", "archive old runs");
  std::snprintf(buf, sizeof buf, "%04d", last + 1);
  continuing = false;
  fs::create_directories(runs / buf);
  return runs / buf;
}

std::string questions_path(const std::string& user_data) {
  std::error_code ec;
  if (fs::is_directory(user_data, ec)) {
    const fs::path p = fs::path(user_data) / "questions.json";
    if (!fs::exists(p, ec)) fail(user_data, "has no questions.json", "give the folder of a LaMP-2 questions file");
    return p.string();
  }
  if (!fs::exists(user_data, ec)) fail(user_data, "--user-data does not exist");
  return user_data;
}

std::string pick_user(const Lamp2Questions& q, const std::string& wanted) {
  const std::vector<std::string> users = lamp2_users(q);
  if (!wanted.empty()) {
    if (std::find(users.begin(), users.end(), wanted) == users.end())
      fail(q.source, "has no user " + wanted, "the file's first users: " + users.front());
    return wanted;
  }
  if (users.size() != 1)
    fail(q.source, "holds " + std::to_string(users.size()) + " users", "say whose adapter this is with --user (e.g. --user " + users.front() + ")");
  return users.front();
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
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
  Checkpoint ck = decode_checkpoint(l->payload, l->path);
  CheckpointInfo info{ck.state.step, ck.meta.progress.value("elapsed_s", 0.0)};
  if (full) *full = std::move(ck);
  return info;
}

// Training steps planned, from the child's log ("total" of its step rows); 0 when unknown.
int64_t planned_steps(const fs::path& train_dir) {
  std::error_code ec;
  const fs::path log = train_dir / "log.jsonl";
  if (!fs::exists(log, ec)) return 0;
  std::string text = read_file(log.string());
  int64_t total = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    json row = json::parse(text.substr(pos, end - pos), nullptr, false);
    if (row.is_object() && row.value("type", "") == "train") total = row.value("total", int64_t{0});
    pos = end + 1;
  }
  return total;
}

std::string summary_markdown(const NightlyResult& r, const json& run_info, const std::string& report_note) {
  auto row = [](const char* name, const ClassificationMetrics& m) {
    char buf[256];
    std::snprintf(buf, sizeof buf, "| %s | %lld/%lld | %.4f | %.4f |\n", name, static_cast<long long>(m.n_correct),
                  static_cast<long long>(m.n), m.accuracy, m.macro_f1);
    return std::string(buf);
  };
  std::string s = "# Nightly run " + fs::path(r.run_dir).filename().string() + "\n\n";
  s += "- user: " + run_info.value("user", std::string()) + "\n";
  s += "- model: " + run_info.value("model", std::string()) + "\n";
  s += "- method: " + run_info.value("method", std::string()) + ", retrieved items per prompt: " +
       std::to_string(run_info.value("k_retrieved", 0)) + "\n";
  s += "- training: " + std::to_string(r.train_steps) + "/" + std::to_string(r.train_total) + " steps, " +
       fmt("%.1f", r.train_elapsed_s) + " s" + (r.budget_exhausted ? " (stopped by the wall-time budget)" : "") + "\n";
  s += "- held-out items: " + std::to_string(r.candidate.n) + " (the user's latest profile items)\n\n";
  s += "| adapter | correct | accuracy | macro-F1 |\n|---|---|---|---|\n";
  s += row("candidate (this run)", r.candidate);
  s += row(r.current_before.empty() ? "current (none: base model)" : "current", r.current);
  s += "\n**Decision: ";
  s += r.outcome == NightlyOutcome::Published ? "published** the candidate (not worse than the current adapter): "
                                              : "kept** the current adapter (the candidate is worse): ";
  s += "`current` -> " + (r.current_after.empty() ? std::string("none (base model)") : r.current_after) + "\n";
  if (!report_note.empty()) s += "\nTraining report: " + report_note + "\n";
  return s;
}

}  // namespace

NightlyResult run_nightly(const NightlyOptions& o, const NightlyLog& log) {
  // Options and inputs first: a typo fails before OUT is touched.
  parse_train_method(o.method);
  if (o.k_retrieved < 0) fail("--retrieve " + std::to_string(o.k_retrieved), "must not be negative");
  if (o.budget_sec < 0) fail("--budget-sec", "must not be negative");
  if (o.exe.empty() || ::access(o.exe.c_str(), X_OK) != 0)
    fail(o.exe, "the nightlora executable to run training with is not there");
  std::error_code ec;
  if (!fs::exists(o.model, ec)) fail(o.model, "--model does not exist");
  const std::string qpath = questions_path(o.user_data);
  const Lamp2Questions questions = load_lamp2_questions(qpath);
  const std::string user = pick_user(questions, o.user);
  // The split is checked now (too short a profile...), though only a new run uses it.
  const NightlyData split = nightly_split_user(questions, user, o.holdout, o.k_retrieved);

  fs::create_directories(o.out, ec);
  if (ec) fail(o.out, "cannot create the job folder: " + ec.message());
  JobLock lock(fs::path(o.out) / ".lock");
  bool continuing = false;
  const fs::path run = pick_run_dir(o.out, continuing);
  NightlyResult res;
  res.run_dir = run.string();

  // 1. data (run.json, written last, marks it complete).
  json run_info;
  if (fs::exists(run / "run.json")) {
    run_info = read_json(run / "run.json");
    if (run_info.value("user", "") != user || run_info.value("model", "") != fs::absolute(o.model).string())
      fail((run / "run.json").string(),
           "an unfinished run for user " + run_info.value("user", std::string("?")) + " with model " +
               run_info.value("model", std::string("?")) + " is in this folder",
           "run with that user and model to finish it, or remove " + run.string());
    log("continuing run " + run.string() + " (with the settings it started with)");
  } else {
    const NightlyData& d = split;
    write_file_atomic((run / "heldout_questions.json").string(), lamp2_questions_json(d.heldout));
    write_file_atomic((run / "heldout_outputs.json").string(), lamp2_outputs_json(d.heldout_golds));
    write_prompt_completion_jsonl(d.train, (run / "train.jsonl").string());
    // --from-current continues the adapter published when the run started (a stable folder).
    const std::string start_adapter = o.from_current ? nightly_current_adapter(o.out) : "";
    run_info = {{"user", user},
                {"model", fs::absolute(o.model).string()},
                {"questions", fs::absolute(qpath).string()},
                {"data_fingerprint", fingerprint_path(qpath)},
                {"method", o.method},
                {"k_retrieved", o.k_retrieved},
                {"train_examples", d.train.size()},
                {"heldout_items", d.heldout.questions.size()},
                {"heldout_unknown_tags", d.n_unknown_tags},
                {"start_adapter", start_adapter},
                {"budget_sec", o.budget_sec},
                {"threads", o.threads},
                {"report", o.report},
                {"train_args", train_arguments(o, run, start_adapter)}};
    write_json(run / "run.json", run_info);
    log("run " + run.string() + ": user " + user + ", " + std::to_string(d.train.size()) + " training examples, " +
        std::to_string(d.heldout.questions.size()) + " held-out items");
  }
  const int k = run_info.value("k_retrieved", 0);
  const double budget = run_info.value("budget_sec", 0.0);
  const int threads = run_info.value("threads", 0);
  const fs::path train_dir = run / "train";

  // 2. train (the child resumes from its checkpoints by itself).
  if (!fs::exists(run / "trained.json")) {
    std::vector<std::string> args = run_info.at("train_args").get<std::vector<std::string>>();
    bool budget_exhausted = false;
    if (budget > 0) {
      const std::optional<CheckpointInfo> ck = newest_checkpoint(train_dir);
      const double left = budget - (ck ? ck->elapsed_s : 0.0);
      if (left <= 0) budget_exhausted = true;
      else args.insert(args.end(), {"--max-wall", fmt("%.6f", left)});
    }
    if (!budget_exhausted) {
      log("training (" + run_info.value("method", std::string()) + ") in a child process; its output: " +
          (run / "train.out").string());
      const ChildExit ex = run_child(o.exe, args, (run / "train.out").string());
      if (!ex.exited || ex.code == 129 || ex.code == 130 || ex.code == 143) {
        res.outcome = NightlyOutcome::Interrupted;
        log(std::string("training was interrupted (") +
            (ex.exited ? "exit code " + std::to_string(ex.code) : "signal " + std::to_string(ex.code)) +
            "); its checkpoints are kept: run the same command again to continue");
        return res;
      }
      if (ex.code != 0 && ex.code != 75)  // 75: stopped by the budget (exit_codes.h)
        fail((run / "train.out").string(), "training failed (exit code " + std::to_string(ex.code) + "):\n" +
                                               file_tail((run / "train.out").string()));
    }
    const std::optional<CheckpointInfo> ck = newest_checkpoint(train_dir);
    if (!ck) fail(train_dir.string(), "training left no checkpoint", "see " + (run / "train.out").string());
    const int64_t total = planned_steps(train_dir);
    const bool finished = fs::exists(train_dir / "adapter_model.safetensors") && total > 0 && ck->step >= total;
    write_json(run / "trained.json", {{"steps", ck->step},
                                      {"total", total},
                                      {"elapsed_s", ck->elapsed_s},
                                      {"finished", finished},
                                      {"budget_exhausted", !finished}});
  }
  const json trained = read_json(run / "trained.json");
  res.train_steps = trained.value("steps", int64_t{0});
  res.train_total = trained.value("total", int64_t{0});
  res.train_elapsed_s = trained.value("elapsed_s", 0.0);
  res.budget_exhausted = trained.value("budget_exhausted", false);

  // The model is loaded only now: on a small device it should not be in memory twice while
  // the child trains.
  std::unique_ptr<Model> model = Model::load(o.model);

  // 3. candidate: the newest checkpoint's adapter.
  const fs::path cand_dir = run / "candidate";
  if (!fs::exists(cand_dir / "adapter.gguf")) {
    Checkpoint ck;
    if (!newest_checkpoint(train_dir, &ck)) fail(train_dir.string(), "the training checkpoints are gone");
    fs::create_directories(cand_dir);
    save_adapter_peft(ck.state.adapter, *model, cand_dir.string());
    save_adapter_gguf(ck.state.adapter, *model, (cand_dir / "adapter.gguf").string());  // written last: the marker
  }

  // 4. eval, on the held-out items. eval.json holds the decision, so it is taken once.
  const std::string current_at_eval = nightly_current_adapter(o.out);
  if (!fs::exists(run / "eval.json")) {
    const Lamp2Questions hq = load_lamp2_questions((run / "heldout_questions.json").string());
    const Lamp2Outputs ho = load_lamp2_outputs((run / "heldout_outputs.json").string());
    Lamp2EvalOptions eo;
    eo.k_retrieved = k;
    eo.threads = threads;
    const LoraAdapter cand = load_adapter(cand_dir.string(), *model);
    log("evaluating the candidate and the current adapter on " + std::to_string(hq.questions.size()) +
        " held-out items");
    const Lamp2EvalResult rc = evaluate_lamp2(*model, &cand, hq, ho, eo);
    std::optional<LoraAdapter> cur;
    if (!current_at_eval.empty()) cur = load_adapter(current_at_eval, *model);
    const Lamp2EvalResult ru = evaluate_lamp2(*model, cur ? &*cur : nullptr, hq, ho, eo);
    const ClassificationMetrics& mc = rc.metrics.overall;
    const ClassificationMetrics& mu = ru.metrics.overall;
    // Not worse: at least as many held-out items right, and on a tie a macro-F1 at least as high.
    const bool publish = mc.n_correct > mu.n_correct || (mc.n_correct == mu.n_correct && mc.macro_f1 >= mu.macro_f1);
    write_json(run / "eval.json", {{"candidate", metrics_json(mc)},
                                   {"current", metrics_json(mu)},
                                   {"current_adapter", current_at_eval},
                                   {"publish", publish},
                                   {"candidate_detail", json::parse(lamp2_eval_json(rc, true))},
                                   {"current_detail", json::parse(lamp2_eval_json(ru, true))}});
  }
  const json ev = read_json(run / "eval.json");
  res.candidate = metrics_from_json(ev.at("candidate"));
  res.current = metrics_from_json(ev.at("current"));
  res.current_before = ev.value("current_adapter", std::string());
  const bool publish = ev.value("publish", false);

  // 5. publish (repeatable: a job killed here writes the same folder and link again).
  if (publish) {
    const fs::path dest = fs::path(o.out) / "adapters" / run.filename();
    fs::create_directories(dest);
    const LoraAdapter cand = load_adapter(cand_dir.string(), *model);
    save_adapter_peft(cand, *model, dest.string());
    save_adapter_gguf(cand, *model, (dest / "adapter.gguf").string());
    write_json(dest / "heldout_metrics.json", ev.at("candidate"));
    nightly_point_current(o.out, dest.string());
    res.outcome = NightlyOutcome::Published;
  } else {
    res.outcome = NightlyOutcome::KeptCurrent;
  }
  res.current_after = nightly_current_adapter(o.out);

  // 6. report, summary, decision (the decision marks the run finished).
  std::string report_note;
  if (run_info.value("report", true) && !fs::exists(run / "report.out")) {
    // `nightlora report` belongs to another part of the tool; it is used when present.
    const ChildExit probe = run_child(o.exe, {"report", "--help"}, (run / "report.probe").string());
    fs::remove(run / "report.probe", ec);
    if (probe.exited && probe.code == 0) {
      const ChildExit rep = run_child(o.exe, {"report", train_dir.string(), "--out", (run / "report.html").string()},
                                      (run / "report.out").string());
      report_note = rep.exited && rep.code == 0 ? "[report.html](report.html)"
                                                : "`nightlora report` failed, see " + (run / "report.out").string();
    } else {
      report_note = "`nightlora report` is not available in this build";
    }
  }
  write_file_atomic((run / "summary.md").string(), summary_markdown(res, run_info, report_note));
  write_json(run / "decision.json", {{"outcome", nightly_outcome_name(res.outcome)},
                                     {"candidate", ev.at("candidate")},
                                     {"current", ev.at("current")},
                                     {"current_before", res.current_before},
                                     {"current_after", res.current_after},
                                     {"train_steps", res.train_steps},
                                     {"train_total", res.train_total},
                                     {"train_elapsed_s", res.train_elapsed_s},
                                     {"budget_exhausted", res.budget_exhausted}});
  log(std::string("decision: ") + nightly_outcome_name(res.outcome) + " (candidate " +
      std::to_string(res.candidate.n_correct) + "/" + std::to_string(res.candidate.n) + ", current " +
      std::to_string(res.current.n_correct) + "/" + std::to_string(res.current.n) + "); summary: " +
      (run / "summary.md").string());
  return res;
}

}  // namespace nl
