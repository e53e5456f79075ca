#include "nightlora/job/pacing.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "nightlora/util/error.h"

namespace nl {

namespace {
std::string fmt(const char* f, double a, double b = 0, double c = 0) {
  char buf[160];
  std::snprintf(buf, sizeof(buf), f, a, b, c);
  return buf;
}
}  // namespace

void PacingConfig::validate() const {
  if (duty && !(*duty > 0 && *duty <= 1)) fail("--duty", "must be in (0, 1], got " + std::to_string(*duty), "e.g. --duty 0.6 works 60% of the time");
  if (ceiling_c && !(std::isfinite(*ceiling_c) && *ceiling_c > -40 && *ceiling_c < 150))
    fail("--temp-ceiling", "must be a temperature in degrees Celsius, got " + std::to_string(*ceiling_c));
  if (!(poll_s > 0)) fail("pacing", "poll interval must be positive");
  if (!(max_wait_s >= poll_s)) fail("pacing", "the longest cool-down must be at least one poll interval");
  if (!(rise_safety >= 1)) fail("pacing", "rise safety factor must be at least 1");
  if (rise_window < 1) fail("pacing", "rise window must be at least 1 step");
  if (!(min_duty > 0 && min_duty <= 1)) fail("pacing", "minimum duty must be in (0, 1]");
  if (!(backoff > 0 && backoff < 1)) fail("pacing", "backoff must be in (0, 1)");
  if (!(recover >= 0 && recover <= 1)) fail("pacing", "recovery step must be in [0, 1]");
}

PacingController::PacingController(PacingConfig cfg) : cfg_(std::move(cfg)), detector_(cfg_.throttle) { cfg_.validate(); }

double PacingController::expected_rise_c() const {
  if (rises_.empty()) return 0;
  return *std::max_element(rises_.begin(), rises_.end()) * cfg_.rise_safety;
}

bool PacingController::must_cool(double temp_c) const {
  return cfg_.ceiling_c && temp_c + expected_rise_c() >= *cfg_.ceiling_c;
}

double PacingController::step_done(double step_s, double work_units, std::optional<double> temp_start_c,
                                   std::optional<double> temp_end_c, std::string* reason) {
  ++steps_;
  detector_.observe(work_units > 0 ? step_s / work_units : 0);
  if (temp_start_c && temp_end_c) {
    // Only heating counts: a step that cooled (it started right after a throttled burst, say)
    // tells nothing about how much the next one may heat.
    rises_.push_back(std::max(0.0, *temp_end_c - *temp_start_c));
    if (static_cast<int>(rises_.size()) > cfg_.rise_window) rises_.pop_front();
  }
  std::string why;
  double idle = 0;
  if (cfg_.duty && *cfg_.duty < 1) {
    idle = step_s * (1 - *cfg_.duty) / *cfg_.duty;
    why = fmt("duty cycle %.2f", *cfg_.duty);
  }
  bool sensorless_ceiling = cfg_.ceiling_c && !temp_end_c;
  if (cfg_.pace_on_throttling || sensorless_ceiling) {
    if (detector_.throttled())
      fallback_duty_ = std::max(cfg_.min_duty, fallback_duty_ * cfg_.backoff);
    else
      fallback_duty_ = std::min(1.0, fallback_duty_ + cfg_.recover);
    double fb_idle = step_s * (1 - fallback_duty_) / fallback_duty_;
    if (fb_idle > idle || why.empty()) {
      idle = fb_idle;
      why = (detector_.throttled() ? fmt("throttling detected (step %.2fx the cool baseline): duty cut to %.2f",
                                         detector_.slowdown(), fallback_duty_)
                                   : fmt("no throttling (step %.2fx baseline): duty %.2f",
                                         detector_.slowdown(), fallback_duty_)) +
            (sensorless_ceiling ? " [no temperature reading: pacing on throughput]" : "");
    }
  }
  if (reason) *reason = why;
  return idle;
}

}  // namespace nl
