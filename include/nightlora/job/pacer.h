// The pacer a training loop calls around each step: it reads the temperature, asks the
// PacingController how long to idle, idles (re-reading the sensor while waiting to cool) and
// reports the decision. The same code drives the simulated device and the real one: only the
// temperature source and the sleep function differ.
//
//   Pacer pacer(cfg, source.get(), real_sleep);
//   for (...) { pacer.before_step(); run_step(); log(pacer.after_step(seconds, tokens)); }
#pragma once
#include <functional>
#include <optional>

#include "nightlora/job/pacing.h"
#include "nightlora/job/temperature.h"

namespace nl {

class Pacer {
 public:
  using Sleep = std::function<void(double seconds)>;
  // Asked at every poll while waiting to cool: true ends the wait early (a pause or SIGTERM
  // arrived), so a long cool-down never delays a checkpoint.
  using Interrupt = std::function<bool()>;

  // `source` may be null (no sensor): a ceiling is then paced on throughput.
  Pacer(PacingConfig cfg, TemperatureSource* source, Sleep sleep, Interrupt interrupt = {});

  // Reads the temperature just before a step (its rise is measured from here).
  void before_step();
  // After the step: inserts the idle time and returns the decision.
  PacingDecision after_step(double step_s, double work_units = 1.0);

  const PacingController& controller() const { return ctl_; }
  double total_idle_s() const { return total_idle_s_; }

 private:
  std::optional<double> read();

  PacingController ctl_;
  TemperatureSource* source_;
  Sleep sleep_;
  Interrupt interrupt_;
  std::optional<double> temp_start_;
  double total_idle_s_ = 0;
};

// The real sleep (std::this_thread::sleep_for).
void sleep_seconds(double seconds);

}  // namespace nl
