// Fuzz target: the run folder `nightlora report RUN_DIR` reads (report/run_log.h): log.jsonl
// (one JSON row per line: train, val, pace, sim, wait, session, rollback, end, and types it
// does not know) and run.json (the run's record: model, configuration, sessions, outcome).
// Whatever reads is rendered as the report does it, over wall time and over steps (the
// summary, the events table, every chart with its non-finite markers, the energy figure).
// Input: log.jsonl, optionally "\n----\n" and run.json.
#include <cstdint>
#include <string>

#include "fuzz_util.h"
#include "nightlora/report/html_report.h"
#include "nightlora/report/run_log.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto parts = nlfuzz::split_parts(std::string_view(reinterpret_cast<const char*>(data), size), 2);
  std::error_code ec;
  const nlfuzz::fs::path dir = nlfuzz::scratch_dir() / "run";
  nlfuzz::fs::remove(dir / "run.json", ec);
  nlfuzz::write_scratch("run/log.jsonl", parts[0]);
  if (parts.size() > 1) nlfuzz::write_scratch("run/run.json", parts[1]);
  nlfuzz::run_guarded([&] {
    const nl::RunLog run = nl::read_run_log(dir.string());
    std::string why;
    (void)run.energy_j(&why);
    for (nl::XAxis x : {nl::XAxis::Time, nl::XAxis::Steps}) {
      nl::ReportOptions opt;
      opt.x = x;
      (void)nl::render_report_html(run, opt);
    }
  });
  return 0;
}
