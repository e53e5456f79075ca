#include "nightlora/job/throttle_detector.h"

#include <algorithm>

namespace nl {

namespace {
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
}  // namespace

ThrottleDetector::ThrottleDetector(ThrottleDetectorConfig cfg) : cfg_(cfg) {
  cfg_.baseline_steps = std::max(1, cfg_.baseline_steps);
  cfg_.window = std::max(1, cfg_.window);
  cfg_.skip_first = std::max(0, cfg_.skip_first);
}

void ThrottleDetector::observe(double seconds_per_unit) {
  if (!(seconds_per_unit > 0)) return;  // a step that did no work says nothing about speed
  ++seen_;
  if (seen_ <= cfg_.skip_first) return;
  recent_.push_back(seconds_per_unit);
  if (static_cast<int>(recent_.size()) > cfg_.window) recent_.pop_front();
  if (baseline_ == 0) {
    warm_.push_back(seconds_per_unit);
    if (static_cast<int>(warm_.size()) == cfg_.baseline_steps) baseline_ = median(warm_);
    return;
  }
  // A job started on an already hot device takes a throttled baseline; when the device later
  // runs consistently faster, that is the truer baseline.
  if (static_cast<int>(recent_.size()) == cfg_.window) baseline_ = std::min(baseline_, median({recent_.begin(), recent_.end()}));
}

double ThrottleDetector::slowdown() const {
  if (baseline_ == 0 || recent_.empty()) return 1.0;
  return median({recent_.begin(), recent_.end()}) / baseline_;
}

}  // namespace nl
