// A simulated device, so that thermal pacing can be tested deterministically here (a server
// with no phone in it) and explored with `nightlora simulate-thermal`.
//
// The device is one lumped thermal mass: heat capacity C (J/°C) coupled to the ambient air by
// thermal resistance R (°C/W):
//     dT/dt = (P·R − (T − T_ambient)) / (R·C)
// so with constant power P the temperature approaches T_ambient + P·R with time constant R·C.
// Training steps draw `step_power_w`, idle time `idle_power_w`. Like a phone's governor, the
// device throttles when it reaches `throttle_at_c`: the clock drops to `throttle_speed` of
// full speed (steps take longer) and the power to `throttle_power` of full power, until it
// has cooled to `throttle_release_c`. Time is simulated, never slept: a step of work W takes
// W seconds at full speed, W / throttle_speed when throttled.
#pragma once
#include <cstdint>

namespace nl {

struct ThermalSimConfig {
  double ambient_c = 25;
  double r_c_per_w = 8;       // °C per W: steady state 25 + 6·8 = 73 °C under full load
  double c_j_per_c = 15;      // J per °C: time constant R·C = 120 s
  double step_power_w = 6;
  double idle_power_w = 0.5;
  double step_work_s = 1.0;   // one step's duration at full speed
  double throttle_at_c = 60;
  double throttle_release_c = 57;
  double throttle_speed = 0.5;
  double throttle_power = 0.5;
  double start_c = -1000;     // initial temperature; below -273: ambient
  double tick_s = 0.05;       // integration step (the solution is exact within a tick)

  // Throws nl::Error naming the flag when a value makes no physical sense.
  void validate() const;
};

struct SimStepOutcome {
  double seconds = 0;        // simulated duration
  double throttled_s = 0;    // part of it spent throttled
  double energy_j = 0;
  double temp_end_c = 0;
};

class SimulatedDevice {
 public:
  explicit SimulatedDevice(const ThermalSimConfig& cfg);

  // Runs one step of `work_scale` × step_work_s seconds of full-speed work.
  SimStepOutcome run_step(double work_scale = 1.0);
  // Idles (draws idle power) for `seconds`.
  void idle(double seconds);

  double temperature_c() const { return temp_c_; }
  double now_s() const { return now_s_; }
  bool throttled() const { return throttled_; }
  double energy_j() const { return energy_j_; }
  const ThermalSimConfig& config() const { return cfg_; }

 private:
  // Advances `dt` seconds at power `p`, then lets the governor look at the temperature.
  void advance(double dt, double p);

  ThermalSimConfig cfg_;
  double temp_c_;
  double now_s_ = 0;
  double energy_j_ = 0;
  bool throttled_ = false;
};

}  // namespace nl
