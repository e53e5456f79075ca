// The nightly personalization job: the user's own data in, a better adapter (or the same one)
// out. docs/PERSONALIZATION.md is the how-to (folder contract, scheduling, exit codes).
//
// Tasks (nightly_task.h): `generic` reads the app's JSONL (any format `train` reads, with an
// optional timestamp key, see nightly_user_data.h); `lamp2` reads a LaMP-2 questions.json and
// adds LaMP-2 accuracy to the decision. Both go through the same steps.
//
// A run, in OUT/runs/NNNN/ (0001, 0002, ...; the newest one that is not sealed is continued):
//   1. data:    the task writes train.jsonl (what training reads) and heldout.jsonl (the
//               user's latest items, what the decision scores), then run.json (settings).
//   2. train:   `nightlora train --background ...` as a CHILD PROCESS of the same executable,
//               in runs/NNNN/train (checkpoints, log.jsonl): its loop, checkpoints, resume,
//               pacing and background gate are reused unchanged, and a crash of either side
//               cannot corrupt the other. The child dies with the job (PR_SET_PDEATHSIG:
//               SIGTERM, on which train checkpoints and stops); SIGINT/SIGTERM/SIGHUP to the
//               job are passed on as SIGTERM. A wall-time budget covers the run across
//               restarts (--max-wall of what is left). trained.json records the outcome.
//   3. candidate: the adapter of the newest checkpoint, in runs/NNNN/candidate (PEFT).
//   4. eval:    candidate and current adapter (or the base model) on heldout.jsonl: the
//               per-item supervised-token loss, and the task's metric (eval.json).
//   5. decide and publish (nightly_gate.h): when the gate says so, the candidate's files are
//               hard-linked into OUT/adapters/NNNN and OUT/current (a symbolic link) is
//               replaced by rename(2): readers always see a complete adapter.
//   6. seal:    checkpoints and train's own adapter copy are deleted, older candidates and
//               data files are pruned, adapters beyond --keep-adapters (never the current
//               one) removed; summary.md, then decision.json, which seals the run.
// Every step's outputs are written atomically and a step whose outputs exist is not redone,
// so a job killed at any moment continues where it was. OUT/.lock (nl::FolderLock, inherited
// by the training child) keeps two jobs from sharing OUT.
//
// Recovery: a run that fails (the child exits with an error or is killed, a step throws) is
// counted in failures.json and retried with its own settings by the next job; after
// max_attempts failures it is abandoned (abandoned.json says why) and a fresh run starts. A
// run whose settings differ from the command's is abandoned too (naming what changed), and
// so is the current one on `--reset`.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "nightlora/eval/lamp2.h"
#include "nightlora/eval/nightly_gate.h"

namespace nl {

struct NightlyOptions {
  std::string exe;        // the nightlora executable whose `train` command runs as the child
  std::string model;      // base model (GGUF file or HF folder)
  std::string user_data;  // generic: a folder of *.jsonl files, or one file; lamp2: questions.json or its folder
  std::string out;        // the job's folder
  std::string task = "auto";  // generic, lamp2, or auto (lamp2 when user_data is/holds questions.json)
  // generic task
  std::string timestamp_key = "timestamp";  // key of a line's time (Unix seconds or ISO 8601)
  double holdout_share = 0.2;               // share of the items held out when holdout == 0
  int64_t max_train_items = 2000;           // the newest items before the held-out ones; 0 = all
  int64_t max_heldout = 200;                // at most this many held out by the share (evaluation time)
  // lamp2 task
  std::string user;       // the user id; "" = the only user in the data
  int k_retrieved = 0;    // BM25-retrieved earlier profile items in each prompt (training and eval)
  // both
  int holdout = 0;        // latest items held out for the decision; 0 = holdout_share (at least min_heldout)
  double budget_sec = 0;  // training wall time of one run, across restarts; 0 = none
  bool from_current = true;  // train on from the current adapter (false: a fresh adapter each run)
  int threads = 0;
  GateOptions gate;
  int max_attempts = 3;      // failures of one run before it is abandoned
  int keep_adapters = 3;     // published adapters kept (the newest; the current one always)
  bool reset = false;        // abandon the unfinished run and start a fresh one
  bool gguf = false;         // also write adapter.gguf (llama.cpp) next to the PEFT files
  // Training settings, passed to `train` (the rest of its options through extra_train_args).
  std::string method = "first-order";  // or "mezo"
  double mezo_eps = 1e-3;
  int64_t iters = 0;   // 0: epochs
  int64_t epochs = 3;
  int64_t batch = 4;
  int64_t rank = 8;
  double alpha = 16;
  double lr = 1e-3;
  int64_t seq_len = 512;
  uint64_t seed = 0;
  int64_t save_every = 10;
  std::vector<std::string> extra_train_args;  // e.g. --window 23:00-07:00 --require-power
  bool report = true;  // call `nightlora report` on the run when the command exists
  // Polled while the job runs: the stop signal received (SIGINT, SIGTERM, SIGHUP), 0 = none.
  std::function<int()> stop_signal;
};

enum class NightlyOutcome {
  Published,    // the candidate became OUT/current
  KeptCurrent,  // the gate kept the current adapter (decision.json says why)
  Interrupted,  // stopped before the decision (signal, window, pause): run again to continue
};
const char* nightly_outcome_name(NightlyOutcome o);

struct NightlyResult {
  NightlyOutcome outcome = NightlyOutcome::Interrupted;
  int stop_signal = 0;   // Interrupted by this signal (0: by training's own stop: window, pause...)
  std::string run_dir;
  std::string reason;    // the gate's reason, or where it stopped
  std::string current_before;  // adapter folder OUT/current pointed to before ("" = none: base model)
  std::string current_after;
  double candidate_loss = 0, current_loss = 0;
  int64_t train_steps = 0, train_total = 0;  // steps done / planned
  double train_elapsed_s = 0;
  bool budget_exhausted = false;
};

// The job's exit code for a result (exit_codes.h): 0 decided, 128+N stopped by signal N,
// 75 stopped by training's own conditions.
int nightly_exit_code(const NightlyResult& r);

// Where the job's progress lines go (the CLI prints them).
using NightlyLog = std::function<void(const std::string& line)>;

// Runs (or continues) one nightly run. Throws nl::Error for bad input (no data, no such user,
// ...), nl::FolderBusy when another job holds OUT, and nl::Error when the run failed (counted
// towards its abandonment).
NightlyResult run_nightly(const NightlyOptions& opt, const NightlyLog& log);

// The adapter folder OUT/current points to, or "" when there is none yet.
std::string nightly_current_adapter(const std::string& out);

// Points OUT/current at `adapter_dir` (a folder inside OUT) atomically: a new symbolic link
// renamed over the old one, then OUT fsync'd.
void nightly_point_current(const std::string& out, const std::string& adapter_dir);

// Publishes the adapter files of `candidate_dir` as OUT/adapters/<name> (hard links, or
// copies across file systems), made durable, then points OUT/current at it. Repeatable: a job
// killed part-way publishes the same files again. Returns the published folder.
std::string nightly_publish(const std::string& out, const std::string& name, const std::string& candidate_dir);

// The held-out split of one LaMP-2 user's profile (the lamp2 task's step 1).
struct NightlyData {
  std::vector<Lamp2Example> train;  // OPPU examples of the earlier items
  Lamp2Questions heldout;           // one question per held-out item; profile = the training items
  Lamp2Outputs heldout_golds;
  int64_t n_unknown_tags = 0;       // held-out items skipped because their tag is not one of the 15
};
NightlyData nightly_split_user(const Lamp2Questions& q, const std::string& user, int holdout, int k_retrieved);

// LaMP-2 questions / outputs files' JSON text for `q` / `o` (what load_lamp2_* read back).
std::string lamp2_questions_json(const Lamp2Questions& q);
std::string lamp2_outputs_json(const Lamp2Outputs& o);

}  // namespace nl
