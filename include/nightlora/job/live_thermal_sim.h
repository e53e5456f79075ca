// `nightlora train --temp-source sim[:key=value,...]`: the simulated device (thermal_sim.h)
// standing in for the thermal body of the machine during a *real* training run, so pacing
// and throttling can be exercised end to end here, where no sensor heats up.
//
// The design, and why it is honest:
//  - The device's clock follows the wall clock. Between steps (logging, checkpoints, pacing
//    idle, background waits) the device idles at idle power up to "now" before every reading.
//  - Each finished training step is run on the device as `work` seconds of full-speed work:
//    the step's measured duration by default (the device heats as long as this machine
//    computed), or a fixed `step=S` seconds per step (deterministic, for tests and demos).
//  - When the device throttles, its step lasts longer than the work (work / throttle speed
//    for the throttled part). The job then really sleeps the difference, so a throttled step
//    takes that much more wall time and the throughput the job sees (and logs) really drops,
//    as on a hot phone. With a fixed `step=S`, a step that took less than S of real time is
//    also stretched to S (the simulated device is slower than this machine); one that took
//    longer leaves the device idle for the excess (it caught up with the wall clock).
//  - Temperatures come from the device model only; nothing is read from the machine.
//
// Keys (as in `nightlora simulate-thermal`): ambient, r (°C/W), c (J/°C), step-power,
// idle-power (W), throttle-at, throttle-release (°C), throttle-speed, throttle-power
// (fractions), start (°C), step (seconds of work per step; default: the measured duration).
#pragma once
#include <functional>
#include <optional>
#include <string>

#include "nightlora/job/temperature.h"
#include "nightlora/job/thermal_sim.h"

namespace nl {

struct LiveSimSpec {
  ThermalSimConfig device;
  std::optional<double> step_work_s;  // fixed work per step; empty: the measured step time
};

// True for "sim" and "sim:..." (the --temp-source values this file handles).
bool is_sim_source(const std::string& spec);
// Parses "sim" or "sim:c=0.25,step=0.05". Throws nl::Error naming the bad key or value.
LiveSimSpec parse_sim_source(const std::string& spec);

// What the device did during one training step.
struct LiveSimStep {
  double real_s = 0;       // the step as measured on this machine
  double work_s = 0;       // full-speed work given to the device
  double device_s = 0;     // how long the device took for it
  double extra_s = 0;      // wall time added by sleeping (throttling / a slower device)
  double throttled_s = 0;  // part of device_s spent throttled
  double temp_end_c = 0;
  double energy_j = 0;     // the device's energy for the step (simulated, not measured)
};

class LiveThermalSim : public TemperatureSource {
 public:
  using Now = std::function<double()>;        // seconds, monotonic
  using Sleep = std::function<void(double)>;  // really waits

  // Defaults: the steady clock and a real sleep.
  explicit LiveThermalSim(const LiveSimSpec& spec, Now now = {}, Sleep sleep = {});

  // Idles the device up to now, then reads its temperature.
  TempReading read() override;
  std::string describe() const override;

  // Call right after a training step that took `real_s` seconds (ending now): runs it on the
  // device and sleeps whatever wall time the device needs beyond it.
  LiveSimStep step_finished(double real_s);

  const SimulatedDevice& device() const { return dev_; }

 private:
  // Idles the device until its clock reaches the wall clock.
  void catch_up(double wall_s);

  LiveSimSpec spec_;
  SimulatedDevice dev_;
  Now now_;
  Sleep sleep_;
  double origin_s_ = 0;  // wall-clock seconds at which the device clock was 0
};

}  // namespace nl
