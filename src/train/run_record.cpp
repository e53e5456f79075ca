#include "run_record.h"

#include <ctime>
#include <filesystem>

#include "nightlora/job/atomic_file.h"

namespace nl {

namespace {

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

RunRecord::RunRecord(std::string path, bool resuming) : path_(std::move(path)) {
  std::error_code ec;
  if (resuming && std::filesystem::exists(path_, ec)) {
    record_ = nlohmann::json::parse(read_file(path_), nullptr, false);
    if (!record_.is_object()) record_ = nlohmann::json::object();  // damaged: start it again
  }
}

void RunRecord::start_session(int64_t from_step) {
  if (!record_["sessions"].is_array()) record_["sessions"] = nlohmann::json::array();
  record_["sessions"].push_back({{"started", utc_now()}, {"from_step", from_step}});
  save();
}

void RunRecord::end_session(const std::string& outcome, int64_t to_step) {
  nlohmann::json& sess = record_["sessions"].back();
  sess["ended"] = utc_now();
  sess["to_step"] = to_step;
  sess["outcome"] = outcome;
  save();
}

void RunRecord::save() const { write_file_atomic(path_, record_.dump(2) + "\n"); }

}  // namespace nl
