// The nightly job's state from its folder (see nightly_status.h).
#include "nightlora/eval/nightly_status.h"

#include <filesystem>

#include "nightlora/eval/nightly.h"
#include "nightlora/job/atomic_file.h"
#include "nightlora/job/checkpoint_store.h"
#include "nightlora/util/error.h"
#include "nightly_runs.h"

namespace nl {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {
json read_or_null(const fs::path& p) {
  std::error_code ec;
  if (!fs::exists(p, ec)) return json();
  json j = json::parse(read_file(p.string()), nullptr, false);
  return j.is_discarded() ? json() : j;
}

// Fields of the state files as the status shows them: a field that is missing or of another
// type (a file damaged or edited by hand) reads as empty, never as json::value's type_error
// (found by fuzz_nightly_status).
std::string text_at(const json& j, const char* key) {
  const auto it = j.is_object() ? j.find(key) : j.end();
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}
double loss_at(const json& j, const char* side) {
  const auto it = j.is_object() ? j.find(side) : j.end();
  if (it == j.end() || !it->is_object()) return 0.0;
  const auto loss = it->find("loss");
  return loss != it->end() && loss->is_number() ? loss->get<double>() : 0.0;
}
}  // namespace

json nightly_status(const std::string& out, int last) {
  std::error_code ec;
  if (!fs::is_directory(fs::path(out) / "runs", ec))
    fail(out, "is not a nightly job's folder (no runs/ in it)", "give the --out folder of `nightlora nightly`");
  json s = {{"out", out}, {"current", nightly_current_adapter(out)}};
  const std::vector<fs::path> runs = nightly_runs(out);
  json list = json::array();
  for (size_t i = runs.size() > static_cast<size_t>(last) ? runs.size() - static_cast<size_t>(last) : 0; i < runs.size(); ++i) {
    const fs::path& r = runs[i];
    json row = {{"run", r.filename().string()}};
    if (json d = read_or_null(r / "decision.json"); d.is_object()) {
      const std::string outcome = text_at(d, "outcome");
      row["state"] = outcome.empty() ? std::string("?") : outcome;
      row["reason"] = text_at(d, "reason");
      row["candidate_loss"] = loss_at(d, "candidate");
      row["current_loss"] = loss_at(d, "current");
    } else if (json a = read_or_null(r / "abandoned.json"); a.is_object()) {
      row["state"] = "abandoned";
      row["reason"] = text_at(a, "reason");
    } else {
      row["state"] = "unfinished";
      row["failures"] = run_failures(r);
      if (json f = read_or_null(r / "failures.json"); f.is_object()) row["reason"] = text_at(f, "last_error");
    }
    list.push_back(std::move(row));
  }
  s["runs"] = list;
  json next = {{"state", "fresh"}};
  if (!runs.empty() && !run_sealed(runs.back())) {
    next = {{"state", "continue"}, {"run", runs.back().filename().string()}, {"failures", run_failures(runs.back())}};
    const fs::path ck = runs.back() / "train" / "checkpoints";
    if (fs::exists(ck, ec)) {
      CheckpointStore store(ck.string());
      next["checkpoints"] = store.list().size();
    }
  }
  s["next"] = next;
  s["storage"] = storage_json(measure_storage(out));
  return s;
}

std::string nightly_status_text(const json& s) {
  std::string t = "current: " + (s.value("current", std::string()).empty() ? std::string("none (the base model)")
                                                                            : s.value("current", std::string())) + "\n";
  for (const json& r : s.at("runs")) {
    t += "run " + r.value("run", std::string()) + ": " + r.value("state", std::string());
    // The reason says the scores when there are any.
    if (!r.value("reason", std::string()).empty()) t += ": " + r.value("reason", std::string());
    t += "\n";
  }
  const json& n = s.at("next");
  t += n.value("state", std::string()) == "continue"
           ? "next: continues run " + n.value("run", std::string()) + " (" + std::to_string(n.value("failures", 0)) +
                 " failure(s) so far)\n"
           : "next: a fresh run\n";
  const json& st = s.at("storage");
  StorageUse u;
  u.total = st.value("total_bytes", uint64_t{0});
  u.adapters = st.value("adapter_bytes", uint64_t{0});
  u.checkpoints = st.value("checkpoint_bytes", uint64_t{0});
  u.other = st.value("other_bytes", uint64_t{0});
  u.n_published = st.value("published_adapters", int64_t{0});
  t += "storage: " + storage_line(u) + "\n";
  return t;
}

}  // namespace nl
