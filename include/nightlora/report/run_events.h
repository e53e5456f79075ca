// What happened in a training run besides its steps, as the report shows it: the rows of the
// "Events" table (resumes, skipped or non-finite steps, rollbacks, the end of a diverged or
// early-stopped run), the markers the time-series charts draw for them, and the last finite
// losses (a run that diverged must not report its final loss as 0 or NaN).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "nightlora/report/run_log.h"
#include "nightlora/report/svg_chart.h"

namespace nl {

// What the charts' x axis counts: wall time since the run began (summed over its sessions)
// or training steps.
enum class XAxis { Time, Steps };

// The x of a row on `axis` (every row has a step and a time).
template <class Row>
double x_of(const Row& r, XAxis axis) {
  return axis == XAxis::Steps ? static_cast<double>(r.step) : r.t;
}

// One line of the events table. Consecutive bad steps with the same cause are one line.
struct EventRow {
  int64_t line = 0;           // where in the log it starts, for ordering
  int64_t step = 0, last_step = 0;  // last_step > step for a run of steps
  int64_t count = 1;
  double t = 0;
  std::string what;
  std::string reason;
  std::string steps() const;  // "57" or "57–60"
};

std::vector<EventRow> event_rows(const RunLog& run);

// The markers of the run's events on `axis`: a dashed line at each resume, rollback and the
// end of a diverged or early-stopped run, and a cross on the x axis at each skipped step.
std::vector<XMarker> event_markers(const RunLog& run, XAxis axis);

// Crosses on the x axis where `value(row)` was not finite or the step was skipped, for a
// chart of that value (skipped steps are not drawn on any series: their figures were refused).
std::vector<XMarker> non_finite_markers(const RunLog& run, XAxis axis, double (*value)(const TrainRow&),
                                        const std::string& what);

// The legend entry of the crosses above.
extern const char* const kNonFiniteMarker;

// The last finite figure of a series, how many rows after it were not finite (or skipped),
// and the mean of the last `window` finite ones.
struct LastFinite {
  bool found = false;
  int64_t step = 0;
  double value = 0;
  int64_t not_finite_after = 0;
  double mean = 0;
  int64_t mean_of = 0;
};

// Training loss: over the steps of the run's history (not the ones a rollback or a resume
// redid), skipped steps counted as not finite (their loss was refused).
LastFinite last_training_loss(const RunLog& run, int64_t window = 10);
LastFinite last_validation_loss(const RunLog& run);

}  // namespace nl
