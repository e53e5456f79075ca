// `nightlora report RUN_DIR`: one self-contained HTML page about a training run (inline CSS
// and inline SVG charts made here; no script, no network, no external file), readable at a
// glance: a summary table (status, tokens, wall and active time, energy or why it is
// unavailable, the last finite losses, the adapter kept, model, configuration), a table of
// the run's events (resumes, skipped or non-finite steps, rollbacks, how it ended), and charts
// over wall time or steps of the training and validation loss, learning rate, gradient norm,
// tokens/s, temperature (with the pacing ceiling) and pacing idle time, where the wall time
// went, the per-step time breakdown and memory. The events are marked on every time-series
// chart; a figure that was not finite is a gap with a cross on the x axis, never a 0.
// Figures a run did not log are said to be absent (one line, no empty chart), with the reason
// where it is known.
#pragma once
#include <string>

#include "nightlora/report/run_events.h"
#include "nightlora/report/run_log.h"

namespace nl {

struct ReportOptions {
  // Wall time by default: pacing, waits and throttling are about time, and the axis never
  // goes back; steps show the learning curve without the pauses (a rolled-back stretch is
  // drawn again over the same steps).
  XAxis x = XAxis::Time;
};

// The page for a run already read.
std::string render_report_html(const RunLog& run, const ReportOptions& opt = {});

// Reads RUN_DIR and writes the page to `out_path` (default: RUN_DIR/report.html), atomically.
// Returns the path written. Throws nl::Error for a missing or unreadable run (see run_log.h).
std::string write_run_report(const std::string& run_dir, const std::string& out_path = "",
                             const ReportOptions& opt = {});

}  // namespace nl
