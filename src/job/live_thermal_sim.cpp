#include "nightlora/job/live_thermal_sim.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <thread>

#include "nightlora/util/error.h"

namespace nl {

bool is_sim_source(const std::string& spec) { return spec == "sim" || spec.rfind("sim:", 0) == 0; }

LiveSimSpec parse_sim_source(const std::string& spec) {
  const std::string where = "--temp-source " + spec;
  if (!is_sim_source(spec)) fail(where, "not a simulated-device source", "use sim or sim:key=value,...");
  LiveSimSpec s;
  ThermalSimConfig& d = s.device;
  const std::string keys =
      "ambient, r, c, step-power, idle-power, throttle-at, throttle-release, throttle-speed, throttle-power, start, step";
  bool release_given = false;
  std::istringstream in(spec.size() > 4 ? spec.substr(4) : "");
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    if (eq == std::string::npos) fail(where, "'" + item + "' is not key=value", "keys: " + keys);
    const std::string key = item.substr(0, eq), text = item.substr(eq + 1);
    double v = 0;
    size_t used = 0;
    try {
      v = std::stod(text, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != text.size() || text.empty() || !std::isfinite(v))
      fail(where, "the value of '" + key + "' is not a number: '" + text + "'");
    if (key == "ambient") d.ambient_c = v;
    else if (key == "r") d.r_c_per_w = v;
    else if (key == "c") d.c_j_per_c = v;
    else if (key == "step-power") d.step_power_w = v;
    else if (key == "idle-power") d.idle_power_w = v;
    else if (key == "throttle-at") d.throttle_at_c = v;
    else if (key == "throttle-release") d.throttle_release_c = v, release_given = true;
    else if (key == "throttle-speed") d.throttle_speed = v;
    else if (key == "throttle-power") d.throttle_power = v;
    else if (key == "start") d.start_c = v;
    else if (key == "step") {
      if (!(v > 0)) fail(where, "step must be a positive number of seconds");
      s.step_work_s = v;
    } else {
      fail(where, "unknown key '" + key + "'", "keys: " + keys);
    }
  }
  // As in simulate-thermal: the release point follows throttle-at when only that was given.
  if (!release_given) d.throttle_release_c = d.throttle_at_c - 3;
  // The device's own time step must be fine enough for short (test-sized) steps.
  if (s.step_work_s) d.tick_s = std::min(d.tick_s, *s.step_work_s / 10);
  try {
    d.validate();
  } catch (const Error& e) {
    fail(where, e.what());
  }
  return s;
}

LiveThermalSim::LiveThermalSim(const LiveSimSpec& spec, Now now, Sleep sleep)
    : spec_(spec), dev_(spec.device), now_(std::move(now)), sleep_(std::move(sleep)) {
  if (!now_)
    now_ = [] { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); };
  if (!sleep_)
    sleep_ = [](double s) {
      if (s > 0) std::this_thread::sleep_for(std::chrono::duration<double>(s));
    };
  origin_s_ = now_();
}

void LiveThermalSim::catch_up(double wall_s) {
  const double behind = (wall_s - origin_s_) - dev_.now_s();
  if (behind > 0) dev_.idle(behind);
}

TempReading LiveThermalSim::read() {
  catch_up(now_());
  TempReading r;
  r.celsius = dev_.temperature_c();
  r.sensor = "simulated device";
  return r;
}

std::string LiveThermalSim::describe() const {
  const ThermalSimConfig& d = dev_.config();
  char work[32] = "";
  if (spec_.step_work_s) std::snprintf(work, sizeof work, "%g s", *spec_.step_work_s);
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "simulated device (ambient %.1f C, R %.3g C/W, C %.3g J/C: time constant %.3g s; %.3g W in steps, %.3g W idle; "
                "throttles at %.1f C to %.0f%% speed until %.1f C; work per step: %s)",
                d.ambient_c, d.r_c_per_w, d.c_j_per_c, d.r_c_per_w * d.c_j_per_c, d.step_power_w, d.idle_power_w,
                d.throttle_at_c, d.throttle_speed * 100, d.throttle_release_c,
                spec_.step_work_s ? work : "the measured step time");
  return buf;
}

LiveSimStep LiveThermalSim::step_finished(double real_s) {
  LiveSimStep o;
  o.real_s = std::max(0.0, real_s);
  const double end = now_();
  // The step began real_s ago: the device idled until then.
  catch_up(end - o.real_s);
  o.work_s = spec_.step_work_s ? *spec_.step_work_s : o.real_s;
  const SimStepOutcome s = dev_.run_step(o.work_s / dev_.config().step_work_s);
  o.device_s = s.seconds;
  o.throttled_s = s.throttled_s;
  o.temp_end_c = s.temp_end_c;
  o.energy_j = s.energy_j;
  // The device is now at (step start + device_s); the wall clock must get there too.
  // Differences below a microsecond are rounding of the two clocks, not a slower device.
  const double behind = (origin_s_ + dev_.now_s()) - now_();
  o.extra_s = behind > 1e-6 ? behind : 0.0;
  sleep_(o.extra_s);
  return o;
}

}  // namespace nl
