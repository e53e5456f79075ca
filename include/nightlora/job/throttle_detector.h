// Throttling detection from throughput alone, for machines where no temperature sensor can
// be read (many phones hide theirs from apps, containers hide /sys).
//
// A throttled CPU does the same work more slowly, so the time per unit of work (seconds per
// token, or per step when steps are equal) drifts up against what the device managed when it
// was cool: the baseline, taken from the first steps. The first step is skipped (page faults,
// caches, thread start-up make it slow for reasons unrelated to heat).
#pragma once
#include <cstdint>
#include <deque>
#include <vector>

namespace nl {

struct ThrottleDetectorConfig {
  int skip_first = 1;        // warm-up steps ignored
  int baseline_steps = 5;    // steps whose median is the baseline
  int window = 3;            // recent steps whose median is compared with it (rejects outliers)
  double threshold = 1.15;   // slowdown above which the device counts as throttled
};

class ThrottleDetector {
 public:
  explicit ThrottleDetector(ThrottleDetectorConfig cfg = {});

  // One step: its duration divided by its work units.
  void observe(double seconds_per_unit);

  bool has_baseline() const { return baseline_ > 0; }
  double baseline() const { return baseline_; }
  // Recent median time per unit over the baseline; 1 until the baseline exists.
  double slowdown() const;
  bool throttled() const { return slowdown() > cfg_.threshold; }

 private:
  ThrottleDetectorConfig cfg_;
  int64_t seen_ = 0;
  std::vector<double> warm_;   // baseline candidates
  std::deque<double> recent_;
  double baseline_ = 0;
};

}  // namespace nl
