// `nightlora report RUN_DIR`: one self-contained HTML page about a training run (inline CSS
// and inline SVG charts made here; no script, no network, no external file), readable at a
// glance: a summary table (status, tokens, wall and active time, energy or why it is
// unavailable, final losses, adapter, model, configuration) and charts over wall time of
// the training and validation loss, tokens/s, temperature (with the pacing ceiling) and
// pacing idle time, where the wall time went, the per-step time breakdown and memory.
// Figures a run did not log are said to be absent, with the reason where it is known.
#pragma once
#include <string>

#include "nightlora/report/run_log.h"

namespace nl {

// The page for a run already read.
std::string render_report_html(const RunLog& run);

// Reads RUN_DIR and writes the page to `out_path` (default: RUN_DIR/report.html), atomically.
// Returns the path written. Throws nl::Error for a missing or unreadable run (see run_log.h).
std::string write_run_report(const std::string& run_dir, const std::string& out_path = "");

}  // namespace nl
