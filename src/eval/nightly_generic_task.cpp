// The generic task: the app's own JSONL (nightly_user_data.h), split by time; judged by loss.
#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "nightlora/eval/nightly_user_data.h"
#include "nightlora/job/atomic_file.h"
#include "nightlora/util/error.h"
#include "nightly_runs.h"
#include "nightly_task.h"

namespace nl {

namespace {

class GenericTask : public NightlyTask {
 public:
  std::string name() const override { return "generic"; }

  void load(const NightlyOptions& o, const Model& model) override {
    if (!(o.holdout_share > 0 && o.holdout_share < 1)) fail("--holdout-share", "must be in (0, 1)");
    if (o.max_train_items < 0) fail("--max-train-items", "must not be negative");
    DataOptions dopt;
    dopt.max_tokens = o.seq_len;
    data_ = read_user_data(o.user_data, o.timestamp_key, *model.tokenizer, dopt);
    if (data_.items.size() < 2)
      fail(o.user_data,
           "holds " + std::to_string(data_.items.size()) + " usable item(s) (of " + std::to_string(data_.n_lines) +
               " lines); a night needs at least 2: one to train on, one to judge by" +
               (data_.first_problem.empty() ? std::string() : "; first skipped: " + data_.first_problem),
           "let the app collect more data first");
    split_ = split_user_items(data_.items, o.holdout, o.holdout_share, o.gate.min_heldout, o.max_heldout, o.max_train_items);
  }

  nlohmann::json write(const std::filesystem::path& run, const NightlyLog& log) override {
    const int64_t n_new = new_items(run);
    write_file_atomic((run / "train.jsonl").string(), user_items_jsonl(split_.train));
    write_file_atomic((run / "heldout.jsonl").string(), user_items_jsonl(split_.heldout));
    std::string skipped;
    if (data_.n_skipped() > 0) {
      skipped = "; skipped " + std::to_string(data_.n_skipped()) + " (malformed " + std::to_string(data_.n_malformed) +
                ", unusable " + std::to_string(data_.n_unusable) + "; first: " + data_.first_problem + ")";
    }
    log(std::to_string(data_.items.size()) + " usable items (mostly " + data_format_name(data_.format) + "; " +
        std::to_string(n_new) + " new since the last run) in " +
        std::to_string(data_.n_files) + " file(s): " + std::to_string(split_.train.size()) + " to train on, " +
        std::to_string(split_.heldout.size()) + " held out (the latest)" +
        (split_.n_outside_window > 0 ? ", " + std::to_string(split_.n_outside_window) + " older ones outside the window"
                                     : std::string()) +
        (data_.n_truncated > 0 ? ", " + std::to_string(data_.n_truncated) + " longer than --seq-len (truncated)"
                               : std::string()) +
        skipped);
    return {{"format", data_format_name(data_.format)},
            {"files", data_.n_files},
            {"lines", data_.n_lines},
            {"items", data_.items.size()},
            {"new_items", n_new},
            {"newest_time", newest_time()},
            {"train_items", split_.train.size()},
            {"heldout_items", split_.heldout.size()},
            {"outside_window", split_.n_outside_window},
            {"skipped", {{"malformed", data_.n_malformed},
                         {"unusable", data_.n_unusable},
                         {"first", data_.first_problem}}},
            {"truncated", data_.n_truncated}};
  }

 private:
  // The newest item's time (null when no item has one).
  nlohmann::json newest_time() const {
    for (auto it = data_.items.rbegin(); it != data_.items.rend(); ++it)
      if (it->time) return *it->time;
    return nullptr;
  }
  // Items newer than the previous run's newest (by time; untimed data: by count).
  int64_t new_items(const std::filesystem::path& run) const {
    const int64_t n = static_cast<int64_t>(data_.items.size());
    const std::vector<std::filesystem::path> runs = nightly_runs(run.parent_path().parent_path());
    for (auto it = runs.rbegin(); it != runs.rend(); ++it) {
      std::error_code ec;
      if (*it == run || !std::filesystem::exists(*it / "run.json", ec)) continue;
      const nlohmann::json prev = nlohmann::json::parse(read_file((*it / "run.json").string()), nullptr, false);
      if (!prev.is_object() || !prev.contains("data")) continue;
      const nlohmann::json& d = prev["data"];
      if (d.value("newest_time", nlohmann::json()).is_number()) {
        const double t = d["newest_time"].get<double>();
        return std::count_if(data_.items.begin(), data_.items.end(), [t](const UserItem& i) { return i.time && *i.time > t; });
      }
      return std::max<int64_t>(0, n - d.value("items", int64_t{0}));
    }
    return n;
  }

  UserData data_;
  UserSplit split_;
};

}  // namespace

std::unique_ptr<NightlyTask> make_generic_task() { return std::make_unique<GenericTask>(); }

}  // namespace nl
