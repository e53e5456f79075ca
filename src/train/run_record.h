// OUT/run.json: what a run is (model, data, configuration, sensors, background conditions)
// and one entry per session (started, from which step, how it ended), for `nightlora report`.
// The log holds the per-step figures; this file holds what is said once. Written atomically
// at each change.
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace nl {

class RunRecord {
 public:
  // A resumed run continues the file (a damaged one starts again); a new run starts it.
  RunRecord(std::string path, bool resuming);
  nlohmann::json& json() { return record_; }
  void start_session(int64_t from_step);
  void end_session(const std::string& outcome, int64_t to_step);
  void save() const;

 private:
  std::string path_;
  nlohmann::json record_ = nlohmann::json::object();
};

}  // namespace nl
