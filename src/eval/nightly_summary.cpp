// summary.md of a nightly run (see nightly_summary.h).
#include "nightly_summary.h"

#include <cstdio>
#include <filesystem>

namespace nl {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {
std::string fmt_value(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// The held-out scores of the two adapters (and the task metric when there is one).
std::string scores_table(const NightlyResult& r, const json& decision) {
  std::string s = "| adapter | held-out loss |";
  const bool metric = decision.contains("metric");
  if (metric) s += " " + decision["metric"].value("name", std::string()) + " |";
  s += "\n|---|---|" + std::string(metric ? "---|" : "") + "\n";
  s += "| candidate (this run) | " + fmt_value("%.4f", r.candidate_loss) + " |" +
       (metric ? " " + fmt_value("%.4f", decision["metric"].value("candidate", 0.0)) + " |" : "") + "\n";
  s += std::string("| ") + (r.current_before.empty() ? "current (none: base model)" : "current") + " | " +
       fmt_value("%.4f", r.current_loss) + " |" + (metric ? " " + fmt_value("%.4f", decision["metric"].value("current", 0.0)) + " |" : "") + "\n";
  return s + "\n";
}
}  // namespace

std::string nightly_summary_markdown(const NightlyResult& r, const json& run_info, const json& decision,
                                     const std::string& storage, const std::string& report_note) {
  std::string s = "# Nightly run " + fs::path(r.run_dir).filename().string() + "\n\n";
  const json& data = run_info.at("data");
  s += "- task: " + run_info.value("task", std::string()) + ", model: " + run_info.at("settings").value("model", std::string()) + "\n";
  s += "- data: " + std::to_string(data.value("train_items", int64_t{0})) + " items trained on, " +
       std::to_string(data.value("heldout_items", int64_t{0})) + " held out (the latest)";
  if (data.contains("skipped")) {
    const json& sk = data["skipped"];
    int64_t n = 0;
    for (const auto& [k, v] : sk.items())
      if (v.is_number()) n += v.get<int64_t>();
    if (n > 0) s += "; " + std::to_string(n) + " skipped (first: " + sk.value("first", std::string()) + ")";
  }
  s += "\n- training: " + std::to_string(r.train_steps) + (r.train_total > 0 ? "/" + std::to_string(r.train_total) : "") + " steps, " +
       fmt_value("%.1f", r.train_elapsed_s) + " s" + (r.budget_exhausted ? " (stopped by the wall-time budget)" : "") + "\n\n";
  // Nothing scored (training diverged or never began): no table of zeros.
  if (decision.value("heldout_items", int64_t{0}) > 0) s += scores_table(r, decision);
  s += "**Decision: ";
  s += r.outcome == NightlyOutcome::Published ? "published** the candidate: " : "kept** the current adapter: ";
  s += r.reason + ". `current` -> " + (r.current_after.empty() ? std::string("none (base model)") : r.current_after) + "\n";
  s += "\nRule: " + decision.value("rule", std::string()) + ".\n";
  s += "\nStorage: " + storage + "\n";
  if (!report_note.empty()) s += "\nTraining report: " + report_note + "\n";
  return s;
}

}  // namespace nl
