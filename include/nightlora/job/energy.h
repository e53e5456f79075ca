// Energy used by the machine while the job runs, read where the machine tells it:
//  - RAPL powercap counters (/sys/class/powercap/intel-rapl:N/energy_uj; Intel, and AMD
//    since Linux 5.8): the package (or the whole platform, "psys", when present) in
//    microjoules, wrapping at max_energy_range_uj;
//  - otherwise the battery's drain while discharging (energy_now in µWh, or charge_now in
//    µAh times voltage_now in µV).
// Both measure the whole package or device, not this process alone. Where neither can be
// read the energy is *unavailable*, with the reason: never an estimate from time and a
// guessed wattage.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace nl {

class EnergyMeter {
 public:
  // Looks for RAPL, then a discharging battery, under `sysfs_root`; starts counting now.
  static EnergyMeter open(const std::string& sysfs_root = "/sys");

  bool available() const { return kind_ != Kind::None && problem_.empty(); }
  // "RAPL package-0, package-1" or "battery BAT0 drain (energy_now)".
  const std::string& source() const { return source_; }
  // Why there is no figure (also set when a battery starts charging mid-run).
  const std::string& why_unavailable() const { return problem_; }

  // Joules used since open(), or empty when unavailable. Sample at least every few minutes:
  // a RAPL counter can wrap more than once in an hour at high power, and one wrap between
  // samples is all that can be told apart.
  std::optional<double> joules();

 private:
  enum class Kind { None, Rapl, BatteryEnergy, BatteryCharge };
  struct Counter {
    std::string file;
    double range_uj = 0;
    double last_uj = 0;
  };

  Kind kind_ = Kind::None;
  std::string source_, problem_;
  std::vector<Counter> rapl_;
  std::string battery_dir_;
  double last_level_ = 0;    // µWh (energy) or µAh (charge)
  double last_voltage_ = 0;  // µV, for charge-based batteries
  double total_j_ = 0;
};

}  // namespace nl
