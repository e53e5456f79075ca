#include "nightlora/report/run_events.h"

#include <algorithm>
#include <cmath>

#include "nightlora/report/number_format.h"

namespace nl {

const char* const kNonFiniteMarker = "non-finite / skipped step";

namespace {

const char* kResumeColor = "#5b6475";
const char* kRollbackColor = "#8e44ad";
const char* kDivergedColor = "#c0392b";
const char* kEarlyStopColor = "#1e8449";
const char* kCrossColor = "#d62728";

// Why a train row is a bad step, or "" for a good one.
std::string bad_step_what(const TrainRow& r) {
  if (r.skipped) return "skipped: not applied";
  const bool loss = !std::isfinite(r.loss), grad = !std::isfinite(r.grad_norm);
  if (loss && grad) return "loss and gradient norm not finite";
  if (loss) return "loss not finite";
  if (grad) return "gradient norm not finite";
  return "";
}

}  // namespace

std::string EventRow::steps() const {
  return last_step == step ? std::to_string(step) : std::to_string(step) + "–" + std::to_string(last_step);
}

std::vector<EventRow> event_rows(const RunLog& run) {
  std::vector<EventRow> rows;
  // Bad steps, runs of them with one cause merged.
  for (const TrainRow& r : run.train) {
    const std::string what = bad_step_what(r);
    if (what.empty()) continue;
    const std::string reason = r.skipped && !r.skip_reason.empty() ? r.skip_reason
                               : r.skipped                          ? "(no reason logged)"
                                           : "the value was NaN or infinite (null in the log)";
    if (!rows.empty() && rows.back().what == what && rows.back().reason == reason && rows.back().last_step + 1 == r.step) {
      rows.back().last_step = r.step;
      ++rows.back().count;
      continue;
    }
    rows.push_back({r.line, r.step, r.step, 1, r.t, what, reason});
  }
  for (const ValRow& v : run.val)
    if (!std::isfinite(v.loss))
      rows.push_back({v.line, v.step, v.step, 1, v.t, "validation loss not finite", "NaN or infinite (null in the log)"});
  for (const RunEvent& e : run.events) {
    EventRow row{e.line, e.step, e.step, 1, e.t, "", e.reason};
    switch (e.kind) {
      case RunEvent::Kind::Session:
        if (!e.resumed && e.step == 0) continue;  // the run's start
        row.what = e.resumed ? "new session: resumed from the checkpoint at step " + std::to_string(e.step)
                             : "new session, not resumed";
        break;
      case RunEvent::Kind::Rollback:
        row.what = "rolled back to step " + std::to_string(e.to_step) +
                   (std::isfinite(e.lr_scale) ? ", learning rate × " + format_number(e.lr_scale, 4) + " from now on" : "");
        break;
      case RunEvent::Kind::Diverged:
        row.what = "stopped: diverged";
        break;
      case RunEvent::Kind::EarlyStop:
        row.what = "stopped early: no validation improvement";
        break;
    }
    rows.push_back(row);
  }
  std::stable_sort(rows.begin(), rows.end(), [](const EventRow& a, const EventRow& b) { return a.line < b.line; });
  for (EventRow& r : rows)
    if (r.count > 1) r.what += " (" + std::to_string(r.count) + " steps)";
  return rows;
}

std::vector<XMarker> event_markers(const RunLog& run, XAxis axis) {
  std::vector<XMarker> out;
  for (const RunEvent& e : run.events) {
    XMarker m;
    m.x = x_of(e, axis);
    m.style = MarkerStyle::Line;
    switch (e.kind) {
      case RunEvent::Kind::Session:
        if (!e.resumed && e.step == 0) continue;
        m.kind = "session boundary";
        m.color = kResumeColor;
        m.label = e.resumed ? "resumed" : "new session";
        m.tooltip = (e.resumed ? "resumed from step " : "new session at step ") + std::to_string(e.step);
        break;
      case RunEvent::Kind::Rollback:
        m.kind = "rollback";
        m.color = kRollbackColor;
        m.label = "rollback to " + std::to_string(e.to_step);
        m.tooltip = "step " + std::to_string(e.step) + ": rolled back to step " + std::to_string(e.to_step) +
                    (e.reason.empty() ? "" : " (" + e.reason + ")");
        break;
      case RunEvent::Kind::Diverged:
      case RunEvent::Kind::EarlyStop: {
        const bool diverged = e.kind == RunEvent::Kind::Diverged;
        m.kind = m.label = diverged ? "diverged" : "early stop";
        m.color = diverged ? kDivergedColor : kEarlyStopColor;
        m.tooltip = std::string(diverged ? "diverged" : "stopped early") + " at step " + std::to_string(e.step) +
                    (e.reason.empty() ? "" : ": " + e.reason);
        break;
      }
    }
    out.push_back(m);
  }
  for (const TrainRow& r : run.train)
    if (r.skipped)
      out.push_back({x_of(r, axis), kNonFiniteMarker, kCrossColor, MarkerStyle::Cross, "",
                     "step " + std::to_string(r.step) + " skipped" + (r.skip_reason.empty() ? "" : ": " + r.skip_reason)});
  return out;
}

std::vector<XMarker> non_finite_markers(const RunLog& run, XAxis axis, double (*value)(const TrainRow&),
                                        const std::string& what) {
  std::vector<XMarker> out;
  for (const TrainRow& r : run.train)
    if (!r.skipped && !std::isfinite(value(r)))
      out.push_back({x_of(r, axis), kNonFiniteMarker, kCrossColor, MarkerStyle::Cross, "",
                     "step " + std::to_string(r.step) + ": " + what + " not finite"});
  return out;
}

LastFinite last_training_loss(const RunLog& run, int64_t window) {
  LastFinite f;
  for (auto it = run.train.rbegin(); it != run.train.rend(); ++it) {
    if (it->superseded) continue;
    const bool good = !it->skipped && std::isfinite(it->loss);
    if (!good) {
      if (!f.found) ++f.not_finite_after;
      continue;
    }
    if (!f.found) f.found = true, f.step = it->step, f.value = it->loss;
    if (f.mean_of < window) f.mean += it->loss, ++f.mean_of;
  }
  if (f.mean_of) f.mean /= static_cast<double>(f.mean_of);
  return f;
}

LastFinite last_validation_loss(const RunLog& run) {
  LastFinite f;
  for (auto it = run.val.rbegin(); it != run.val.rend() && !f.found; ++it) {
    if (!std::isfinite(it->loss)) {
      ++f.not_finite_after;
      continue;
    }
    f.found = true, f.step = it->step, f.value = it->loss, f.mean = it->loss, f.mean_of = 1;
  }
  return f;
}

}  // namespace nl
