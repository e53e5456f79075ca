// Helpers shared by the nightly job's tests.
#pragma once
#include <chrono>
#include <filesystem>
#include <thread>

namespace nightly_test {

// Waits (up to a minute) until the run `run` of the job in `out` has written a training
// checkpoint.
inline bool wait_for_checkpoint(const std::filesystem::path& out, const std::string& run = "0001") {
  for (int i = 0; i < 600; ++i) {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(out / "runs" / run / "train" / "checkpoints", ec))
      if (e.path().extension() == ".nlck") return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

}  // namespace nightly_test
