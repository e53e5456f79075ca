// A task of the nightly job: where a run's data comes from and, optionally, a metric of its
// own for the decision. The job's steps (nightly.cpp) are the same for every task.
#pragma once
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "nightlora/eval/nightly.h"
#include "nightlora/host/lora.h"
#include "nightlora/modelio/model.h"

namespace nl {

class NightlyTask {
 public:
  virtual ~NightlyTask() = default;
  virtual std::string name() const = 0;
  // Reads and checks the user's data; bad input throws here, before OUT is touched.
  virtual void load(const NightlyOptions& o, const Model& model) = 0;
  // Writes RUN/train.jsonl (what training reads) and RUN/heldout.jsonl (the latest items, in a
  // format `train` reads, scored by loss), and the task's own files; returns what run.json
  // records about the data, and says it in `log`.
  virtual nlohmann::json write(const std::filesystem::path& run, const NightlyLog& log) = 0;
  // The task's own metric of both adapters on the held-out items (detail: per-item results
  // for eval.json); nullopt when the task has none.
  virtual std::optional<TaskMetric> metric(const Model& /*model*/, const LoraAdapter& /*candidate*/,
                                           const LoraAdapter* /*current*/, const std::filesystem::path& /*run*/,
                                           const nlohmann::json& /*run_info*/, nlohmann::json& /*detail*/) {
    return std::nullopt;
  }
};

// The task `o.task` names ("auto": lamp2 when user_data is a questions.json or a folder that
// holds one, else generic).
std::unique_ptr<NightlyTask> make_nightly_task(const NightlyOptions& o);
std::unique_ptr<NightlyTask> make_generic_task();
std::unique_ptr<NightlyTask> make_lamp2_task();

}  // namespace nl
