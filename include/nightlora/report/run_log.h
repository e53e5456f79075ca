// A training run folder as `nightlora report` sees it: the rows of DIR/log.jsonl, sorted by
// kind and placed on one wall-time axis, plus DIR/run.json (what the run is, its sessions).
//
// log.jsonl rows (written by `nightlora train`), by "type":
//   train  step, loss, lr, grad_norm, tokens, tokens_per_s, elapsed_s, energy_j (number or
//          "unavailable"), skipped (true when the divergence guard refused the step) and
//          skip_reason, and whatever per-step measurements the trainer adds: every other
//          number whose name ends in "_s" is taken as a part of the step time, every number
//          whose name contains "rss" or ends in "_bytes" as a memory figure (so new fields
//          appear without a change here, and old logs without them still read)
//   val    step, val_loss              wait   step, reason (background mode)
//   pace   step, step_s, idle_s, temp_c, throttled, slowdown, reason (thermal pacing)
//   sim    step, temp_c, extra_s, throttled_s, sim_energy_j (--temp-source sim)
//   session     step, resumed          first row of each session; step = steps done then
//   rollback    step, to_step, lr_scale, reason   step went bad: back to to_step's state
//   diverged    step, reason           the run stopped as diverged
//   early_stop  step, reason           the run stopped: no validation improvement
// A figure that was not finite is written as null (JSON has no NaN); it is read as NaN, and a
// missing loss, val_loss, lr or grad_norm too: never as 0. Unknown row types and fields are
// ignored (counted, and said on the page).
// Rows other than train carry no time: they are placed at the time of the train row of the
// same step in the run as it stood when the row was written (step 0: the start): after a
// rollback or a resume the steps redone replace the ones abandoned.
//
// Malformed lines: a line that is not a JSON object is an error naming the file and line,
// except the last line when it does not end with a newline (a job writing it right now, or
// one killed mid-line): that one is skipped with a warning shown in the report.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace nl {

struct TrainRow {
  int64_t line = 0;         // in log.jsonl, for ordering against other rows
  int64_t step = 0;
  double t = 0;             // wall time (elapsed_s), seconds
  double loss = NAN;        // NaN: not finite (null in the log) or not logged
  double lr = NAN;
  double grad_norm = NAN;
  bool skipped = false;     // the divergence guard refused this step (not applied)
  std::string skip_reason;
  // A later row redid this step (after a rollback, or a resume from an earlier checkpoint):
  // this one is not part of the run's history any more.
  bool superseded = false;
  double tokens_per_s = 0;
  double step_s = 0;        // tokens / tokens_per_s
  int64_t tokens = 0;
  std::optional<double> energy_j;  // the machine's counter since the session began
  std::map<std::string, double> time_parts;  // per-step time breakdown fields, seconds
  std::map<std::string, double> memory;      // memory fields, bytes
};

struct ValRow {
  int64_t line = 0;
  int64_t step = 0;
  double t = 0;
  double loss = NAN;  // NaN: not finite or not logged
};

struct PaceRow {
  int64_t step = 0;
  double t = 0;
  double idle_s = 0;
  std::optional<double> temp_c;
  bool throttled = false;
  std::string reason;
};

struct SimRow {
  int64_t step = 0;
  double t = 0;
  double temp_c = 0;
  double work_s = 0;       // the work given to the device
  double device_s = 0;     // how long the device took for it (longer when throttled)
  double extra_s = 0;      // wall time the job slept so the step lasted as long as on the device
  double throttled_s = 0;
  double energy_j = 0;
  // The part of the step's time lost to throttling (device time beyond the work).
  double throttle_loss_s() const { return std::max(0.0, device_s - work_s); }
};

struct WaitRow {
  int64_t step = 0;
  double t = 0;
  std::string reason;
};

// A session, rollback, divergence or early stop, in log order.
struct RunEvent {
  enum class Kind { Session, Rollback, Diverged, EarlyStop };
  Kind kind = Kind::Session;
  int64_t line = 0;
  int64_t step = 0;
  double t = 0;
  bool resumed = false;   // Session: continued from a checkpoint
  int64_t to_step = -1;   // Rollback: the step whose state the run went back to
  double lr_scale = NAN;  // Rollback: the learning rate's factor from now on (cumulative)
  std::string reason;
};

struct RunLog {
  std::string dir;
  std::vector<TrainRow> train;
  std::vector<ValRow> val;
  std::vector<PaceRow> pace;
  std::vector<SimRow> sim;
  std::vector<WaitRow> waits;
  std::vector<RunEvent> events;
  int64_t lines = 0;
  std::map<std::string, int64_t> unknown_types;  // row types this reader does not know, counted
  std::vector<std::string> warnings;             // shown at the top of the report
  nlohmann::json record;                         // run.json; null when absent

  // Total measured energy over all sessions (the counter restarts with each session), or
  // empty with the reason in `why`.
  std::optional<double> energy_j(std::string* why) const;
};

// Reads DIR/log.jsonl (and DIR/run.json when present). Throws nl::Error when DIR or its log
// is missing, the log has no rows, or a line is malformed (see above).
RunLog read_run_log(const std::string& dir);

}  // namespace nl
