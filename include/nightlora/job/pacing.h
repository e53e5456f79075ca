// Thermal pacing: how much idle time to insert between training steps so the device stays
// under a temperature ceiling (--temp-ceiling) or works a fixed share of the time (--duty).
//
// The controller chosen here is a *predictive thermostat*, not a PI loop. Why:
//  - The temperature peaks at the end of a step (the device heats while it works and cools
//    while it idles), and each step heats it by a roughly known amount: the rise measured
//    over recent steps. So the next step may start when "temperature now + expected rise"
//    is under the ceiling; until then the job idles and re-reads the sensor every poll_s.
//  - It needs no model of the device: the gains of a PI controller depend on the device's
//    thermal resistance and time constant, which differ by orders of magnitude between a
//    phone's skin sensor and a laptop's CPU die. The thermostat only needs the measured rise.
//  - It idles only when needed, so it keeps the highest duty cycle that holds the ceiling,
//    i.e. the highest throughput; the temperature ripples by about one step's rise under it.
//  - The expected rise is the largest rise over the last `rise_window` steps times
//    `rise_safety`; a step heats most when the device is coolest, so it errs on the safe
//    side. Before the first rise is measured nothing is known: a ceiling can be overshot
//    only then (the "first overshoot"), and only when the very first step crosses it.
//
// --duty D makes active / (active + idle) = D by idling step_s·(1−D)/D after each step.
// With both, the duty idle comes first and the thermostat waits further if still too hot.
//
// Without a readable sensor, a ceiling cannot be held directly. The controller then paces
// on throttling detected from throughput (see ThrottleDetector), adjusting a duty cycle the
// way TCP adjusts its window (additive increase, multiplicative decrease): cut it by
// `backoff` on every step that runs throttled, raise it by `recover` on every step that does
// not. The device then hovers just under its throttling point instead of living above it.
#pragma once
#include <cstdint>
#include <deque>
#include <optional>
#include <string>

#include "nightlora/job/throttle_detector.h"

namespace nl {

struct PacingConfig {
  std::optional<double> ceiling_c;  // hold end-of-step temperature below this
  std::optional<double> duty;       // in (0, 1]: share of wall time spent in steps
  bool pace_on_throttling = false;  // use the throughput fallback even without a ceiling
  double poll_s = 1.0;              // re-read the sensor this often while waiting to cool
  // Longest cool-down after one step. When the device cannot get cool enough to fit one
  // more step under the ceiling (a hot room, a step that heats more than the headroom), the
  // job runs the next step anyway instead of waiting forever, and says so.
  double max_wait_s = 600;
  double rise_safety = 1.25;
  int rise_window = 16;
  ThrottleDetectorConfig throttle;
  double min_duty = 0.1;            // the throughput fallback never idles more than this implies
  double backoff = 0.7;
  double recover = 0.05;

  // Throws nl::Error naming the flag for values out of range.
  void validate() const;
};

// What the pacer decided after one step: the line a job logs per step.
struct PacingDecision {
  int64_t step = 0;                         // 1-based count of steps seen
  double step_s = 0;                        // the step's duration
  std::optional<double> temp_start_c;       // temperature just before the step
  std::optional<double> temp_end_c;         // just after it (the peak)
  std::optional<double> temp_next_c;        // when the next step may start (after idling)
  double idle_s = 0;                        // idle time inserted before the next step
  double expected_rise_c = 0;               // the thermostat's rise estimate
  double slowdown = 1;                      // throughput slowdown against the cool baseline
  bool throttling_suspected = false;
  std::string reason;                       // why this much idle time, in words
};

class PacingController {
 public:
  explicit PacingController(PacingConfig cfg);

  // Records a finished step (duration, work units, temperature before and after when known)
  // and returns the idle time the duty cycle or the throughput fallback asks for, with the
  // reason. The thermostat's wait comes separately (must_cool) because it depends on the
  // temperature re-read while idling.
  double step_done(double step_s, double work_units, std::optional<double> temp_start_c,
                   std::optional<double> temp_end_c, std::string* reason);

  // Whether a step starting at `temp_c` is expected to end above the ceiling.
  bool must_cool(double temp_c) const;
  double expected_rise_c() const;

  const PacingConfig& config() const { return cfg_; }
  const ThrottleDetector& detector() const { return detector_; }
  double fallback_duty() const { return fallback_duty_; }
  int64_t steps() const { return steps_; }

 private:
  PacingConfig cfg_;
  ThrottleDetector detector_;
  std::deque<double> rises_;
  double fallback_duty_ = 1.0;
  int64_t steps_ = 0;
};

}  // namespace nl
