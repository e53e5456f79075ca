// Is the device on external power, and how full is its battery? Read from the kernel's
// power-supply class (/sys/class/power_supply on Linux and Android), with the root
// injectable so tests run against fake trees.
//
// Each entry there has a `type`: "Battery", or a source such as "Mains", "USB", "Wireless"
// with `online` 1 when plugged in. Batteries report `status` (Charging, Discharging, Full,
// Not charging) and `capacity` (percent); some only `energy_now`/`energy_full` or
// `charge_now`/`charge_full`.
#pragma once
#include <optional>
#include <string>

namespace nl {

struct PowerSupplyStatus {
  // Empty when it cannot be told (a battery with no status and no power source listed).
  std::optional<bool> external_power;
  std::optional<double> battery_percent;  // empty without a battery (or without a readable level)
  bool has_battery = false;
  std::string detail;  // how it was decided, e.g. "AC (Mains) online" or "BAT0 Discharging"
};

// Decision rules, in order:
//  1. a non-battery supply with online=1 -> on external power;
//  2. a battery whose status is Charging or Full -> on external power;
//  3. a supply with online=0, or a battery Discharging -> on battery;
//  4. no supply listed (a desktop, a server, a VM) -> external power: a machine
//     without a battery runs on mains, and `detail` says that this was inferred;
//  5. otherwise unknown.
// Supplies with scope "Device" (a mouse's or headset's battery) are ignored.
// With several batteries the percentage is their energy-weighted mean when energies are
// known, else the plain mean of their capacities.
PowerSupplyStatus read_power_supply(const std::string& sysfs_root = "/sys");

}  // namespace nl
