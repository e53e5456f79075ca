#include "nightlora/job/thermal_simulation.h"

#include <algorithm>

#include "nightlora/job/pacer.h"
#include "nightlora/util/error.h"

namespace nl {

namespace {

// The simulated device seen through a perfect sensor.
class SimulatedSensor : public TemperatureSource {
 public:
  explicit SimulatedSensor(const SimulatedDevice& d) : d_(d) {}
  TempReading read() override {
    TempReading r;
    r.celsius = d_.temperature_c();
    r.sensor = "simulated";
    return r;
  }
  std::string describe() const override { return "simulated device"; }

 private:
  const SimulatedDevice& d_;
};

}  // namespace

SimRun simulate_thermal(const ThermalSimConfig& device_cfg, const PacingConfig& pacing, const SimOptions& opt) {
  const int64_t steps = opt.steps;
  if (steps < 1) fail("--steps", "must be at least 1");
  SimulatedDevice dev(device_cfg);
  if (pacing.ceiling_c) {
    // An idle device settles at ambient + idle power × R; a ceiling at or below that can never
    // be reached by waiting, and the thermostat would wait forever.
    double idle_floor = device_cfg.ambient_c + device_cfg.idle_power_w * device_cfg.r_c_per_w;
    if (*pacing.ceiling_c <= idle_floor + 0.5)
      fail("--ceiling", "the ceiling " + std::to_string(*pacing.ceiling_c) + " C is at or below the idle device's temperature (" +
                            std::to_string(idle_floor) + " C)", "choose a ceiling above it");
  }
  SimulatedSensor sensor(dev);
  Pacer pacer(pacing, opt.with_sensor ? &sensor : nullptr, [&](double s) { dev.idle(s); });

  SimRun run;
  SimSummary& sum = run.summary;
  sum.name = opt.name;
  sum.ceiling_c = opt.report_ceiling_c ? opt.report_ceiling_c : pacing.ceiling_c;
  run.steps.reserve(static_cast<size_t>(steps));
  for (int64_t i = 1; i <= steps; ++i) {
    SimStepRecord rec;
    rec.step = i;
    rec.start_s = dev.now_s();
    pacer.before_step();
    SimStepOutcome o = dev.run_step();
    rec.step_s = o.seconds;
    rec.throttled_s = o.throttled_s;
    rec.temp_end_c = o.temp_end_c;
    PacingDecision d = pacer.after_step(o.seconds, 1.0);
    rec.idle_s = d.idle_s;
    rec.reason = d.reason;

    sum.active_s += o.seconds;
    sum.idle_s += d.idle_s;
    sum.throttled_s += o.throttled_s;
    sum.max_temp_c = std::max(sum.max_temp_c, o.temp_end_c);
    if (sum.ceiling_c && o.temp_end_c > *sum.ceiling_c) {
      ++sum.steps_over_ceiling;
      if (!sum.first_over_ceiling_step) sum.first_over_ceiling_step = i;
      else sum.max_temp_after_first_over_c = std::max(sum.max_temp_after_first_over_c, o.temp_end_c);
    } else if (sum.first_over_ceiling_step) {
      sum.max_temp_after_first_over_c = std::max(sum.max_temp_after_first_over_c, o.temp_end_c);
    }
    run.steps.push_back(std::move(rec));
  }
  sum.steps = steps;
  sum.total_s = dev.now_s();
  sum.mean_step_s = sum.active_s / static_cast<double>(steps);
  sum.steps_per_s = sum.total_s > 0 ? static_cast<double>(steps) / sum.total_s : 0;
  sum.duty = sum.total_s > 0 ? sum.active_s / sum.total_s : 0;
  sum.energy_j = dev.energy_j();
  return run;
}

}  // namespace nl
