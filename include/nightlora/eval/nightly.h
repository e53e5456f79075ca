// The nightly personalization job: one user's LaMP-2 data in, a better adapter (or the same
// one) out.
//
// A run, in OUT/runs/NNNN/ (numbered 0001, 0002, ...; the newest unfinished one is continued):
//   1. data:    the user's profile in chronological order; the latest `holdout` items are held
//               out (heldout_questions.json + heldout_outputs.json, LaMP-2 format, each item a
//               question whose profile is the training items), the earlier ones become OPPU
//               training examples with k BM25-retrieved earlier items (train.jsonl).
//   2. train:   `nightlora train --background ...` as a CHILD PROCESS of the same executable,
//               in runs/NNNN/train (checkpoints, log.jsonl). The training loop with its
//               checkpoints, resume, pacing and background gate lives in cli/cmd_train.cpp;
//               running it as a child reuses all of it unchanged and keeps a crash of either
//               side from corrupting the other. The child dies with the job (PR_SET_PDEATHSIG:
//               SIGTERM, which makes train checkpoint and stop). A wall-time budget covers the
//               run across restarts: the child gets what is left of it (--max-wall).
//   3. candidate: the adapter of the newest training checkpoint (the final state when training
//               finished, the last checkpoint when the budget ran out), in runs/NNNN/candidate.
//   4. eval:    the candidate and the current adapter (or the base model when there is none)
//               on the held-out items, by tag scoring (eval.json).
//   5. publish: only if the candidate is not worse (more held-out items right, or as many and a
//               macro-F1 at least as high): its files go to OUT/adapters/NNNN/ (each written
//               atomically, then the folder fsync'd), then the symbolic link OUT/current is
//               replaced by rename(2) to point there. Readers use OUT/current; it always names
//               a complete adapter, the old one until the instant of the rename.
//   6. decision.json (marks the run finished), summary.md, and the run report (`nightlora
//      report`, when that command is present).
// Every step's outputs are written atomically, and a step whose outputs exist is not redone,
// so a job killed at any moment (itself or its child) continues where it was when started
// again and ends in the same consistent state. OUT/.lock keeps two jobs from sharing OUT; the
// training child inherits it, so a new job waits for an orphaned child to finish stopping.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "nightlora/eval/lamp2.h"
#include "nightlora/eval/metrics.h"

namespace nl {

struct NightlyOptions {
  std::string exe;        // the nightlora executable whose `train` command runs as the child
  std::string model;      // base model (GGUF file or HF folder)
  std::string user_data;  // folder with questions.json (LaMP-2 format), or that file itself
  std::string out;        // the job's folder
  std::string user;       // the user id; "" = the only user in the data
  int k_retrieved = 0;    // BM25-retrieved earlier profile items in each prompt (training and eval)
  int holdout = 0;        // latest profile items held out for the decision; 0 = 20% (at least 1)
  double budget_sec = 0;  // training wall time of one run, across restarts; 0 = none
  bool from_current = false;  // continue training the current adapter instead of a fresh one
  int threads = 0;
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
};

enum class NightlyOutcome {
  Published,    // the candidate became OUT/current
  KeptCurrent,  // the candidate was worse; OUT/current is unchanged
  Interrupted,  // training was stopped (signal) before the run could finish: run again
};
const char* nightly_outcome_name(NightlyOutcome o);

struct NightlyResult {
  NightlyOutcome outcome = NightlyOutcome::Interrupted;
  std::string run_dir;
  std::string current_before;  // adapter folder OUT/current pointed to before ("" = none: base model)
  std::string current_after;
  ClassificationMetrics candidate, current;  // on the held-out items
  int64_t train_steps = 0, train_total = 0;  // steps done / planned
  double train_elapsed_s = 0;
  bool budget_exhausted = false;
};

// Where the job's progress lines go (the CLI prints them).
using NightlyLog = std::function<void(const std::string& line)>;

// Runs (or continues) one nightly run. Throws nl::Error for bad input (no such user, too few
// profile items, an unfinished run with other settings, ...) and when the training child fails.
NightlyResult run_nightly(const NightlyOptions& opt, const NightlyLog& log);

// The adapter folder OUT/current points to, or "" when there is none yet.
std::string nightly_current_adapter(const std::string& out);

// Points OUT/current at `adapter_dir` (a folder inside OUT) atomically: a new symbolic link
// renamed over the old one, then OUT fsync'd.
void nightly_point_current(const std::string& out, const std::string& adapter_dir);

// The held-out split of one user's profile (step 1 above).
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
