#include "nightlora/report/run_log.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "nightlora/util/error.h"

namespace nl {

namespace {

namespace fs = std::filesystem;

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Per-step measurements are recognised by their names (see run_log.h), so fields added to
// the trainer's rows later show up without a change here.
bool is_time_part(const std::string& key) {
  static const char* not_parts[] = {"elapsed_s", "eta_s", "step_s", "wall_s", "total_s"};
  for (const char* k : not_parts)
    if (key == k) return false;
  return ends_with(key, "_s") && key.find("per_s") == std::string::npos;
}

// Memory figures and the factor to bytes: "*_bytes", "*_mib", or any "*rss*" (taken as bytes).
std::optional<double> memory_unit(const std::string& key) {
  if (ends_with(key, "_mib")) return 1024.0 * 1024.0;
  if (ends_with(key, "_bytes") || key.find("rss") != std::string::npos) return 1.0;
  return std::nullopt;
}

double num(const nlohmann::json& row, const char* key, double fallback = 0) {
  auto it = row.find(key);
  return it != row.end() && it->is_number() ? it->get<double>() : fallback;
}

// A training figure: null (how the log writes NaN and inf) or absent is NaN, never 0.
double figure(const nlohmann::json& row, const char* key) { return num(row, key, NAN); }

std::string text_of(const nlohmann::json& row, const char* key) {
  auto it = row.find(key);
  return it != row.end() && it->is_string() ? it->get<std::string>() : "";
}

// A step number; 0 when absent, not a number or out of range (a float cast would be undefined).
int64_t step_of(const nlohmann::json& row, const char* key = "step") {
  auto it = row.find(key);
  if (it == row.end() || !it->is_number()) return 0;
  if (it->is_number_integer()) return it->get<int64_t>();
  const double v = it->get<double>();
  return std::isfinite(v) && std::fabs(v) < 9e18 ? static_cast<int64_t>(v) : 0;
}

// `group`: the name of an enclosing object, e.g. "breakdown_s" in {"breakdown_s": {"adapter":
// 0.1, ...}}: a group named "*_s" holds seconds whatever its members are called.
void collect_measurements(const nlohmann::json& obj, const std::string& group, TrainRow& r) {
  const bool seconds_group = ends_with(group, "_s");
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    const std::string& key = it.key();
    if (it->is_object() && group.empty()) {
      collect_measurements(*it, key, r);
      continue;
    }
    if (!it->is_number()) continue;
    const double v = it->get<double>();
    if (auto unit = memory_unit(key)) r.memory[key] = v * *unit;
    else if (seconds_group) r.time_parts[ends_with(key, "_s") ? key : key + "_s"] = v;
    else if (is_time_part(key)) r.time_parts[key] = v;
  }
}

}  // namespace

std::optional<double> RunLog::energy_j(std::string* why) const {
  double total = 0, session_max = 0, last = -1;
  bool any = false;
  for (const TrainRow& r : train) {
    if (!r.energy_j) {
      if (why) *why = "the machine gave no energy reading for this run";
      if (record.is_object() && record.contains("energy") && record["energy"].contains("unavailable") && why)
        *why = record["energy"]["unavailable"].get<std::string>();
      return std::nullopt;
    }
    any = true;
    // The counter starts at 0 in each session: a drop means a new session began.
    if (*r.energy_j < last) {
      total += session_max;
      session_max = 0;
    }
    session_max = std::max(session_max, *r.energy_j);
    last = *r.energy_j;
  }
  if (!any) {
    if (why) *why = "no training steps logged";
    return std::nullopt;
  }
  return total + session_max;
}

RunLog read_run_log(const std::string& dir) {
  std::error_code ec;
  if (dir.empty() || !fs::exists(dir, ec))
    fail(dir.empty() ? "report" : dir, "the run folder does not exist", "give the --out folder of a `nightlora train` run");
  if (!fs::is_directory(dir, ec)) fail(dir, "not a folder", "give the --out folder of a `nightlora train` run");
  const fs::path log_path = fs::path(dir) / "log.jsonl";
  if (!fs::exists(log_path, ec))
    fail(log_path.string(), "the run folder has no log.jsonl",
         "give the --out folder of a `nightlora train` run (the log is written from the first step on)");
  std::ifstream in(log_path, std::ios::binary);
  if (!in) fail(log_path.string(), "cannot read the training log");
  std::stringstream buf;
  buf << in.rdbuf();
  const std::string text = buf.str();

  RunLog run;
  run.dir = dir;
  // The time of each step of the run as it stands at the current line: a train row for step k
  // drops the steps after k (abandoned by a rollback, or redone after a resume).
  std::map<int64_t, double> time_of_step;
  time_of_step[0] = 0;
  auto time_at = [&](int64_t step) {
    auto it = time_of_step.upper_bound(step);  // first step after
    return it == time_of_step.begin() ? 0.0 : std::prev(it)->second;
  };
  std::vector<size_t> history;  // indices into run.train of the run's current steps, in order
  size_t pos = 0;
  int64_t line_no = 0;
  while (pos < text.size()) {
    size_t nl_at = text.find('\n', pos);
    const bool complete = nl_at != std::string::npos;
    std::string line = text.substr(pos, complete ? nl_at - pos : std::string::npos);
    pos = complete ? nl_at + 1 : text.size();
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json row = nlohmann::json::parse(line, nullptr, false);
    if (row.is_discarded() || !row.is_object() || !row.contains("type") || !row["type"].is_string()) {
      if (!complete) {
        run.warnings.push_back(log_path.string() + " line " + std::to_string(line_no) +
                               ": the last line is incomplete (the job may be writing it, or was killed mid-line): skipped");
        break;
      }
      fail(log_path.string() + ":" + std::to_string(line_no),
           row.is_discarded() ? "not a JSON line" : "not a log row (a JSON object with a \"type\")",
           "the log is written by `nightlora train`; remove or repair this line");
    }
    ++run.lines;
    const std::string type = row["type"].get<std::string>();
    const int64_t step = step_of(row);
    if (type == "train") {
      TrainRow r;
      r.line = line_no;
      r.step = step;
      r.t = num(row, "elapsed_s");
      r.loss = figure(row, "loss");
      r.lr = figure(row, "lr");
      r.grad_norm = figure(row, "grad_norm");
      r.skipped = row.contains("skipped") && row["skipped"].is_boolean() && row["skipped"].get<bool>();
      r.skip_reason = text_of(row, "skip_reason");
      r.tokens_per_s = num(row, "tokens_per_s");
      r.tokens = static_cast<int64_t>(num(row, "tokens"));
      r.step_s = r.tokens_per_s > 0 ? static_cast<double>(r.tokens) / r.tokens_per_s : 0;
      if (row.contains("energy_j") && row["energy_j"].is_number()) r.energy_j = row["energy_j"].get<double>();
      collect_measurements(row, "", r);
      while (!history.empty() && run.train[history.back()].step >= step) {
        run.train[history.back()].superseded = true;
        history.pop_back();
      }
      time_of_step.erase(time_of_step.upper_bound(std::max<int64_t>(step, 0)), time_of_step.end());
      time_of_step[step] = r.t;
      history.push_back(run.train.size());
      run.train.push_back(std::move(r));
      continue;
    }
    const double t = time_at(step);
    if (type == "val") {
      run.val.push_back({line_no, step, t, figure(row, "val_loss")});
    } else if (type == "pace") {
      PaceRow r;
      r.step = step;
      r.t = t;
      r.idle_s = num(row, "idle_s");
      if (row.contains("temp_c") && row["temp_c"].is_number()) r.temp_c = row["temp_c"].get<double>();
      r.throttled = row.contains("throttled") && row["throttled"].is_boolean() && row["throttled"].get<bool>();
      r.reason = text_of(row, "reason");
      run.pace.push_back(std::move(r));
    } else if (type == "sim") {
      SimRow r;
      r.step = step;
      r.t = t;
      r.temp_c = num(row, "temp_c");
      r.work_s = num(row, "work_s");
      r.device_s = num(row, "device_s", r.work_s);
      r.extra_s = num(row, "extra_s");
      r.throttled_s = num(row, "throttled_s");
      r.energy_j = num(row, "sim_energy_j");
      run.sim.push_back(r);
    } else if (type == "wait") {
      run.waits.push_back({step, t, text_of(row, "reason")});
    } else if (type == "session" || type == "rollback" || type == "diverged" || type == "early_stop") {
      RunEvent e;
      e.kind = type == "session"    ? RunEvent::Kind::Session
               : type == "rollback" ? RunEvent::Kind::Rollback
               : type == "diverged" ? RunEvent::Kind::Diverged
                                    : RunEvent::Kind::EarlyStop;
      e.line = line_no;
      e.step = step;
      e.t = t;
      e.resumed = row.contains("resumed") && row["resumed"].is_boolean() && row["resumed"].get<bool>();
      if (row.contains("to_step") && row["to_step"].is_number()) e.to_step = step_of(row, "to_step");
      e.lr_scale = figure(row, "lr_scale");
      e.reason = text_of(row, "reason");
      run.events.push_back(std::move(e));
    } else {
      ++run.unknown_types[type];
    }
  }
  if (run.lines == 0)
    fail(log_path.string(), "the training log has no rows yet", "run the report once training has done a step");

  const fs::path record_path = fs::path(dir) / "run.json";
  if (fs::exists(record_path, ec)) {
    std::ifstream rin(record_path, std::ios::binary);
    std::stringstream rb;
    rb << rin.rdbuf();
    run.record = nlohmann::json::parse(rb.str(), nullptr, false);
    if (run.record.is_discarded() || !run.record.is_object()) {
      run.warnings.push_back(record_path.string() + " is not a JSON object: the run's description is missing from this page");
      run.record = nullptr;
    }
  }
  for (const auto& [type, n] : run.unknown_types)
    run.warnings.push_back(std::to_string(n) + " row(s) of type \"" + type + "\" are not shown (unknown to this report)");
  return run;
}

}  // namespace nl
