#include "nightlora/job/thermal_sim.h"

#include <algorithm>
#include <cmath>

#include "nightlora/util/error.h"

namespace nl {

void ThermalSimConfig::validate() const {
  auto positive = [](double v, const char* flag) {
    if (!(v > 0) || !std::isfinite(v)) fail(flag, "must be a positive number, got " + std::to_string(v));
  };
  positive(r_c_per_w, "--r");
  positive(c_j_per_c, "--c");
  positive(step_power_w, "--step-power");
  positive(step_work_s, "--step-seconds");
  positive(tick_s, "tick");
  if (!(idle_power_w >= 0) || idle_power_w > step_power_w)
    fail("--idle-power", "must be between 0 and the step power (" + std::to_string(step_power_w) + " W)");
  if (!(throttle_speed > 0 && throttle_speed <= 1)) fail("--throttle-speed", "must be in (0, 1]");
  if (!(throttle_power > 0 && throttle_power <= 1)) fail("--throttle-power", "must be in (0, 1]");
  if (!(throttle_release_c <= throttle_at_c))
    fail("--throttle-release", "must not be above --throttle-at (" + std::to_string(throttle_at_c) + ")");
}

SimulatedDevice::SimulatedDevice(const ThermalSimConfig& cfg) : cfg_(cfg) {
  cfg_.validate();
  temp_c_ = cfg_.start_c < -273 ? cfg_.ambient_c : cfg_.start_c;
  throttled_ = temp_c_ >= cfg_.throttle_at_c;
}

void SimulatedDevice::advance(double dt, double p) {
  // Exact solution of the RC equation for constant power over dt: no step-size error, so the
  // tick only sets how often the governor looks.
  double t_inf = cfg_.ambient_c + p * cfg_.r_c_per_w;
  temp_c_ = t_inf + (temp_c_ - t_inf) * std::exp(-dt / (cfg_.r_c_per_w * cfg_.c_j_per_c));
  now_s_ += dt;
  energy_j_ += p * dt;
  if (temp_c_ >= cfg_.throttle_at_c) throttled_ = true;
  else if (temp_c_ <= cfg_.throttle_release_c) throttled_ = false;
}

SimStepOutcome SimulatedDevice::run_step(double work_scale) {
  SimStepOutcome o;
  double t0 = now_s_, e0 = energy_j_;
  double work = std::max(0.0, work_scale) * cfg_.step_work_s;  // full-speed seconds left
  while (work > 1e-12) {
    double speed = throttled_ ? cfg_.throttle_speed : 1.0;
    double power = cfg_.step_power_w * (throttled_ ? cfg_.throttle_power : 1.0);
    double dt = std::min(cfg_.tick_s, work / speed);
    if (throttled_) o.throttled_s += dt;
    advance(dt, power);
    work -= dt * speed;
  }
  o.seconds = now_s_ - t0;
  o.energy_j = energy_j_ - e0;
  o.temp_end_c = temp_c_;
  return o;
}

void SimulatedDevice::idle(double seconds) {
  double left = std::max(0.0, seconds);
  while (left > 1e-12) {
    double dt = std::min(cfg_.tick_s, left);
    advance(dt, cfg_.idle_power_w);
    left -= dt;
  }
}

}  // namespace nl
