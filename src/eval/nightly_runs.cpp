// Run folders, recovery and storage of the nightly job (see nightly_runs.h).
#include "nightly_runs.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <set>

#include "nightlora/eval/nightly.h"
#include "nightlora/job/atomic_file.h"
#include "nightlora/job/file_ops.h"
#include "nightlora/util/error.h"

namespace nl {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {
bool is_run_name(const std::string& name) {
  return name.size() == 4 && std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; });
}
void remove_quietly(const fs::path& p) { remove_tree(p.string()); }
// The adapter files `train` writes into its --out folder: the candidate is the copy kept.
constexpr const char* kTrainAdapterFiles[] = {"adapter_model.safetensors", "adapter_config.json", "adapter.gguf"};
constexpr const char* kRunDataFiles[] = {"train.jsonl", "heldout.jsonl", "heldout_questions.json", "heldout_outputs.json"};
}  // namespace

std::vector<fs::path> nightly_runs(const fs::path& out) {
  std::vector<fs::path> runs;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(out / "runs", ec))
    if (e.is_directory() && is_run_name(e.path().filename().string())) runs.push_back(e.path());
  std::sort(runs.begin(), runs.end());
  return runs;
}

bool run_sealed(const fs::path& run) {
  std::error_code ec;
  return fs::exists(run / "decision.json", ec) || fs::exists(run / "abandoned.json", ec);
}

int run_failures(const fs::path& run) {
  std::error_code ec;
  if (!fs::exists(run / "failures.json", ec)) return 0;
  const json j = json::parse(read_file((run / "failures.json").string()), nullptr, false);
  // A count that is not a small whole number (a file damaged or edited by hand): none
  // counted, rather than json::value's type_error (found by fuzz_nightly_status).
  const auto it = j.is_object() ? j.find("count") : j.end();
  return it != j.end() && it->is_number_integer() && *it >= 0 && *it < 1000000 ? it->get<int>() : 0;
}

void record_run_failure(const fs::path& run, const std::string& error) {
  std::error_code ec;
  json j = json::object();
  if (fs::exists(run / "failures.json", ec)) {
    j = json::parse(read_file((run / "failures.json").string()), nullptr, false);
    if (!j.is_object()) j = json::object();
  }
  j["count"] = run_failures(run) + 1;
  j["last_error"] = error;
  write_file_atomic((run / "failures.json").string(), j.dump(1) + "\n");
}

void free_run_training(const fs::path& run) {
  remove_quietly(run / "train" / "checkpoints");
  for (const char* f : kTrainAdapterFiles) remove_quietly(run / "train" / f);
}

void abandon_run(const fs::path& run, const std::string& reason) {
  write_file_atomic((run / "abandoned.json").string(), json({{"reason", reason}}).dump(1) + "\n");
  free_run_training(run);
}

std::string settings_change(const json& before, const json& now) {
  std::string s;
  auto shown = [](const json& v) { return v.is_null() ? std::string("(none)") : v.is_string() ? v.get<std::string>() : v.dump(); };
  for (const auto& [key, value] : now.items()) {
    const json old = before.contains(key) ? before[key] : json();
    if (old != value) s += (s.empty() ? "" : ", ") + key + " " + shown(old) + " -> " + shown(value);
  }
  for (const auto& [key, value] : before.items())
    if (!now.contains(key)) s += (s.empty() ? "" : ", ") + key + " " + shown(value) + " -> (none)";
  return s;
}

void prune_job(const fs::path& out, int keep_adapters) {
  const std::vector<fs::path> runs = nightly_runs(out);
  for (const fs::path& run : runs) {
    if (!run_sealed(run)) continue;
    free_run_training(run);
    if (run == runs.back()) continue;  // the newest run keeps its candidate and data to look at
    remove_quietly(run / "candidate");
    for (const char* f : kRunDataFiles) remove_quietly(run / f);
  }
  const std::string current = nightly_current_adapter(out.string());
  std::vector<fs::path> published;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(out / "adapters", ec))
    if (e.is_directory() && is_run_name(e.path().filename().string())) published.push_back(e.path());
  std::sort(published.begin(), published.end());
  const int64_t n = static_cast<int64_t>(published.size());
  for (int64_t i = 0; i + keep_adapters < n; ++i) {
    const fs::path& a = published[static_cast<size_t>(i)];
    if (!current.empty() && fs::equivalent(a, current, ec)) continue;
    remove_quietly(a);
  }
}

StorageUse measure_storage(const fs::path& out) {
  StorageUse s;
  std::set<std::pair<dev_t, ino_t>> seen;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(out, ec); !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (!it->is_regular_file(ec) || it->is_symlink(ec)) continue;
    struct stat st {};
    if (::stat(it->path().c_str(), &st) != 0 || !seen.insert({st.st_dev, st.st_ino}).second) continue;
    const uint64_t bytes = static_cast<uint64_t>(st.st_size);
    const std::string p = fs::relative(it->path(), out, ec).generic_string();
    const std::string name = it->path().filename().string();
    s.total += bytes;
    if (p.find("/checkpoints/") != std::string::npos) s.checkpoints += bytes;
    else if (p.rfind("adapters/", 0) == 0 || p.find("/candidate/") != std::string::npos ||
             name.rfind("adapter", 0) == 0)
      s.adapters += bytes;
    else s.other += bytes;
  }
  for (const auto& e : fs::directory_iterator(out / "adapters", ec))
    if (e.is_directory()) ++s.n_published;
  return s;
}

namespace {
std::string mib(uint64_t b) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(b) / (1024.0 * 1024.0));
  return buf;
}
}  // namespace

std::string storage_line(const StorageUse& s) {
  return mib(s.total) + " in all: adapters " + mib(s.adapters) + " (" + std::to_string(s.n_published) +
         " published), checkpoints " + mib(s.checkpoints) + ", data and logs " + mib(s.other);
}

json storage_json(const StorageUse& s) {
  return {{"total_bytes", s.total}, {"adapter_bytes", s.adapters}, {"checkpoint_bytes", s.checkpoints},
          {"other_bytes", s.other}, {"published_adapters", s.n_published}};
}

}  // namespace nl
