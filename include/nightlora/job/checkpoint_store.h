// A folder of checkpoints: each one a checked file (atomic, with a CRC-32 footer; see
// atomic_file.h) named by its step, the newest K kept. What goes inside (adapter, optimizer
// moments, RNG streams, data cursor...) is the trainer's business; this class only makes sure
// a checkpoint is either complete or absent, and that a damaged one is skipped for the
// previous good one, with a message, instead of stopping the job or silently starting over.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace nl {

struct CheckpointEntry {
  int64_t step = 0;
  std::string path;
};

struct LoadedCheckpoint {
  int64_t step = 0;
  std::string path;
  std::string payload;
  std::vector<std::string> skipped;  // "<path>: <damage>" for each newer checkpoint passed over
};

class CheckpointStore {
 public:
  // Creates `dir` when missing; removes temporary files left by a write that was killed.
  explicit CheckpointStore(std::string dir, int keep = 3);

  // Writes the checkpoint of `step` (replacing one of the same step), then deletes all but the
  // newest `keep`. Older ones are deleted only after the new one is safely on disk, so a
  // failure (a full disk) leaves every previous checkpoint in place. Returns its path.
  std::string save(int64_t step, std::string_view payload);
  // The same, for a payload `produce` hands over piece by piece (write_file_checked_streamed):
  // a large checkpoint is written without being held whole.
  std::string save(int64_t step, const std::function<void(const std::function<void(std::string_view)>& emit)>& produce);

  // Checkpoints present, oldest first (damaged ones included: this only lists names).
  std::vector<CheckpointEntry> list() const;

  // The newest checkpoint that verifies. Empty when there is none at all (a fresh start).
  // Throws nl::Error when checkpoints exist but every one is damaged: starting over would
  // silently discard the run.
  std::optional<LoadedCheckpoint> load_latest() const;

  const std::string& dir() const { return dir_; }
  static std::string file_name(int64_t step);  // "ckpt-000000001234.nlck"

 private:
  std::string dir_;
  int keep_;
};

}  // namespace nl
