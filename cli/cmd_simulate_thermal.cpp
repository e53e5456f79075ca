// `nightlora simulate-thermal`: the thermal pacing controller on a simulated device (a lumped
// RC thermal model that throttles when hot), run once without pacing and once with it, so
// its behaviour can be explored and compared here without a phone. Output: a per-step table
// (or JSON lines with --json) and a summary of both runs.
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "command.h"
#include "nightlora/job/thermal_simulation.h"

namespace {

struct SimArgs {
  int64_t steps = 600;
  nl::ThermalSimConfig dev;
  double ceiling = 0;
  double duty = 0;
  bool no_sensor = false;
  bool json = false;
  int64_t every = 0;
};

void print_row(const nl::SimStepRecord& r, const std::string& run) {
  std::printf("%-8s %6lld %9.1f %8.2f %7.2f %9.2f %8.2f  %s\n", run.c_str(), static_cast<long long>(r.step), r.start_s,
              r.temp_end_c, r.step_s, r.throttled_s, r.idle_s, r.reason.c_str());
}

nlohmann::json summary_json(const nl::SimSummary& s) {
  nlohmann::json j = {{"type", "summary"},          {"run", s.name},           {"steps", s.steps},
                      {"total_s", s.total_s},       {"active_s", s.active_s},  {"idle_s", s.idle_s},
                      {"throttled_s", s.throttled_s}, {"max_temp_c", s.max_temp_c}, {"mean_step_s", s.mean_step_s},
                      {"steps_per_s", s.steps_per_s}, {"duty", s.duty},        {"energy_j", s.energy_j}};
  if (s.ceiling_c) {
    j["ceiling_c"] = *s.ceiling_c;
    j["steps_over_ceiling"] = s.steps_over_ceiling;
    j["first_over_ceiling_step"] = s.first_over_ceiling_step ? nlohmann::json(*s.first_over_ceiling_step) : nlohmann::json(nullptr);
    if (s.first_over_ceiling_step) j["max_temp_after_first_over_c"] = s.max_temp_after_first_over_c;
  }
  return j;
}

void print_summary(const nl::SimSummary& s) {
  std::printf("%-8s  max %.2f C, mean step %.3f s, throughput %.4f steps/s (duty %.2f), throttled %.1f s of %.1f s in steps, "
              "idle inserted %.1f s, energy %.0f J",
              s.name.c_str(), s.max_temp_c, s.mean_step_s, s.steps_per_s, s.duty, s.throttled_s, s.active_s, s.idle_s,
              s.energy_j);
  if (s.ceiling_c) {
    std::printf(", ceiling %.1f C: ", *s.ceiling_c);
    if (!s.first_over_ceiling_step) std::printf("never exceeded");
    else
      std::printf("first exceeded at step %lld, %lld steps above it, max %.2f C after that step",
                  static_cast<long long>(*s.first_over_ceiling_step), static_cast<long long>(s.steps_over_ceiling),
                  s.max_temp_after_first_over_c);
  }
  std::printf("\n");
}

nlcli::Register reg_simulate_thermal(
    "simulate-thermal", "Run the thermal pacing controller on a simulated device, with and without pacing",
    [](CLI::App& sub) -> nlcli::Run {
      auto a = std::make_shared<SimArgs>();
      sub.add_option("--steps", a->steps, "training steps to simulate")->capture_default_str()->check(CLI::Range(int64_t{1}, int64_t{10000000}));
      sub.add_option("--step-power", a->dev.step_power_w, "power drawn during a step (W)")->capture_default_str();
      sub.add_option("--idle-power", a->dev.idle_power_w, "power drawn while idle (W)")->capture_default_str();
      sub.add_option("--step-seconds", a->dev.step_work_s, "duration of a step at full speed (s)")->capture_default_str();
      sub.add_option("--ambient", a->dev.ambient_c, "ambient temperature (C)")->capture_default_str();
      sub.add_option("--r", a->dev.r_c_per_w, "thermal resistance to ambient (C/W)")->capture_default_str();
      sub.add_option("--c", a->dev.c_j_per_c, "heat capacity (J/C)")->capture_default_str();
      sub.add_option("--start", a->dev.start_c, "initial temperature (C); default: ambient");
      sub.add_option("--throttle-at", a->dev.throttle_at_c, "the device throttles at this temperature (C)")->capture_default_str();
      sub.add_option("--throttle-release", a->dev.throttle_release_c, "and stops throttling below this one (C)")->capture_default_str();
      sub.add_option("--throttle-speed", a->dev.throttle_speed, "clock speed when throttled, as a fraction")->capture_default_str();
      sub.add_option("--throttle-power", a->dev.throttle_power, "power when throttled, as a fraction")->capture_default_str();
      sub.add_option("--ceiling", a->ceiling, "temperature ceiling of the paced run (C); default: 5 below --throttle-at unless --duty is given");
      sub.add_option("--duty", a->duty, "duty cycle of the paced run, in (0, 1]");
      sub.add_flag("--no-sensor", a->no_sensor, "hide the temperature from the pacer: it paces on throughput (throttling detection)");
      sub.add_flag("--json", a->json, "JSON lines: one object per step, then one summary per run");
      sub.add_option("--every", a->every, "print every Nth step (default: 1 with --json, else about 40 rows per run)");
      return [a, &sub]() {
        nl::PacingConfig paced;
        bool has_ceiling = sub.count("--ceiling") > 0, has_duty = sub.count("--duty") > 0;
        if (has_duty) paced.duty = a->duty;
        if (has_ceiling) paced.ceiling_c = a->ceiling;
        else if (!has_duty) paced.ceiling_c = a->dev.throttle_at_c - 5;
        if (a->no_sensor) paced.pace_on_throttling = true;
        // The default release point follows --throttle-at when only that was given.
        if (sub.count("--throttle-at") && !sub.count("--throttle-release")) a->dev.throttle_release_c = a->dev.throttle_at_c - 3;

        nl::SimOptions uo;
        uo.steps = a->steps;
        uo.name = "unpaced";
        uo.report_ceiling_c = paced.ceiling_c;
        nl::SimRun unpaced = nl::simulate_thermal(a->dev, nl::PacingConfig{}, uo);
        nl::SimOptions po;
        po.steps = a->steps;
        po.name = "paced";
        po.with_sensor = !a->no_sensor;
        nl::SimRun pacedrun = nl::simulate_thermal(a->dev, paced, po);
        int64_t every = a->every > 0 ? a->every : a->json ? 1 : std::max<int64_t>(1, a->steps / 40);

        if (a->json) {
          for (const nl::SimRun* r : {&unpaced, &pacedrun})
            for (const auto& s : r->steps) {
              if (s.step % every && s.step != 1 && s.step != a->steps) continue;
              std::cout << nlohmann::json{{"type", "step"},        {"run", r->summary.name}, {"step", s.step},
                                          {"start_s", s.start_s},  {"temp_c", s.temp_end_c}, {"step_s", s.step_s},
                                          {"throttled_s", s.throttled_s}, {"idle_s", s.idle_s}, {"reason", s.reason}}
                                .dump()
                        << "\n";
            }
          std::cout << summary_json(unpaced.summary).dump() << "\n" << summary_json(pacedrun.summary).dump() << "\n";
          return 0;
        }
        std::printf("simulated device: ambient %.1f C, R %.2f C/W, C %.1f J/C (time constant %.0f s), step %.2f s at %.2f W, "
                    "idle %.2f W, throttles at %.1f C (to %.0f%% speed) until %.1f C\n",
                    a->dev.ambient_c, a->dev.r_c_per_w, a->dev.c_j_per_c, a->dev.r_c_per_w * a->dev.c_j_per_c, a->dev.step_work_s,
                    a->dev.step_power_w, a->dev.idle_power_w, a->dev.throttle_at_c, a->dev.throttle_speed * 100,
                    a->dev.throttle_release_c);
        std::string what;
        char buf[96];
        if (paced.ceiling_c) std::snprintf(buf, sizeof(buf), "ceiling %.1f C", *paced.ceiling_c), what += buf;
        if (paced.duty) std::snprintf(buf, sizeof(buf), "%sduty %.2f", what.empty() ? "" : ", ", *paced.duty), what += buf;
        if (a->no_sensor) what += " (no sensor: pacing on throughput)";
        std::printf("paced run: %s\n\n", what.c_str());
        std::printf("%-8s %6s %9s %8s %7s %9s %8s  %s\n", "run", "step", "time_s", "temp_C", "step_s", "throttled", "idle_s", "reason");
        for (const nl::SimRun* r : {&unpaced, &pacedrun})
          for (const auto& s : r->steps)
            if (s.step % every == 0 || s.step == 1 || s.step == a->steps) print_row(s, r->summary.name);
        std::printf("\n");
        print_summary(unpaced.summary);
        print_summary(pacedrun.summary);
        return 0;
      };
    });

}  // namespace
