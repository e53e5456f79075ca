// A whole paced (or unpaced) run on the simulated device: what `nightlora simulate-thermal`
// prints and what the pacing tests check. It drives the same Pacer a real job uses, with the
// simulated device as temperature sensor and its idle() as the sleep.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "nightlora/job/pacing.h"
#include "nightlora/job/thermal_sim.h"

namespace nl {

struct SimStepRecord {
  int64_t step = 0;
  double start_s = 0;        // simulated time the step began
  double step_s = 0;
  double throttled_s = 0;
  double temp_end_c = 0;     // true device temperature at the end of the step
  double idle_s = 0;
  std::string reason;
};

struct SimSummary {
  std::string name;                  // "unpaced" / "paced"
  int64_t steps = 0;
  double total_s = 0;                // simulated wall time
  double active_s = 0;               // in steps
  double idle_s = 0;                 // inserted by pacing
  double throttled_s = 0;            // in steps, throttled
  double max_temp_c = 0;
  double mean_step_s = 0;
  double steps_per_s = 0;            // throughput over the whole run
  double duty = 0;                   // active / total
  double energy_j = 0;
  std::optional<double> ceiling_c;
  std::optional<int64_t> first_over_ceiling_step;  // first step ending above the ceiling
  double max_temp_after_first_over_c = 0;          // max end temperature after that step
  int64_t steps_over_ceiling = 0;
};

struct SimRun {
  std::vector<SimStepRecord> steps;
  SimSummary summary;
};

struct SimOptions {
  int64_t steps = 600;
  std::string name = "paced";
  // false hides the temperature from the pacer (it then paces on throughput), to explore
  // machines without readable sensors.
  bool with_sensor = true;
  // The ceiling the summary counts overshoots against; default: the pacing ceiling. Set it
  // for an unpaced run to see how far above the paced run's ceiling it goes.
  std::optional<double> report_ceiling_c;
};

SimRun simulate_thermal(const ThermalSimConfig& device, const PacingConfig& pacing, const SimOptions& opt);

}  // namespace nl
