#include "nightlora/job/power_supply.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <vector>

namespace nl {

namespace {

namespace fs = std::filesystem;

std::optional<std::string> read_supply_attr(const fs::path& dir, const char* name) {
  std::ifstream f(dir / name);
  if (!f) return std::nullopt;
  std::string s;
  std::getline(f, s);
  if (f.bad()) return std::nullopt;
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  return s;
}

std::optional<double> read_number(const fs::path& dir, const char* name) {
  auto s = read_supply_attr(dir, name);
  if (!s || s->empty()) return std::nullopt;
  char* end = nullptr;
  double v = std::strtod(s->c_str(), &end);
  if (end == s->c_str() || *end != '\0') return std::nullopt;
  return v;
}

struct Battery {
  std::string name, status;
  std::optional<double> percent, energy_now, energy_full;
};

}  // namespace

PowerSupplyStatus read_power_supply(const std::string& sysfs_root) {
  PowerSupplyStatus st;
  fs::path dir = fs::path(sysfs_root) / "class" / "power_supply";
  std::vector<fs::path> entries;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) entries.push_back(it->path());
  std::sort(entries.begin(), entries.end());

  std::vector<Battery> batteries;
  std::string online_source, offline_source;
  int system_supplies = 0;
  for (const auto& e : entries) {
    std::string name = e.filename().string();
    std::string type = read_supply_attr(e, "type").value_or("");
    // A wireless mouse or headset battery (scope "Device") says nothing about the machine.
    if (read_supply_attr(e, "scope").value_or("") == "Device") continue;
    ++system_supplies;
    if (type == "Battery") {
      Battery b;
      b.name = name;
      b.status = read_supply_attr(e, "status").value_or("");
      b.percent = read_number(e, "capacity");
      // energy_* in µWh; charge_* in µAh. Either gives a level; the energy also weights the mean.
      b.energy_now = read_number(e, "energy_now");
      b.energy_full = read_number(e, "energy_full");
      if (!b.energy_now || !b.energy_full) {
        auto cn = read_number(e, "charge_now"), cf = read_number(e, "charge_full");
        if (cn && cf) b.energy_now = cn, b.energy_full = cf;
      }
      if (!b.percent && b.energy_now && b.energy_full && *b.energy_full > 0) b.percent = 100.0 * *b.energy_now / *b.energy_full;
      if (b.percent) b.percent = std::clamp(*b.percent, 0.0, 100.0);
      batteries.push_back(b);
    } else if (!type.empty()) {
      auto online = read_supply_attr(e, "online");
      if (!online) continue;
      if (*online == "1" && online_source.empty()) online_source = name + " (" + type + ") online";
      if (*online == "0" && offline_source.empty()) offline_source = name + " (" + type + ") offline";
    }
  }

  st.has_battery = !batteries.empty();
  double wsum = 0, wpct = 0, psum = 0;
  int pn = 0;
  bool all_weighted = true;
  for (const auto& b : batteries) {
    if (!b.percent) continue;
    psum += *b.percent;
    ++pn;
    if (b.energy_full && *b.energy_full > 0) wsum += *b.energy_full, wpct += *b.percent * *b.energy_full;
    else all_weighted = false;
  }
  if (pn > 0) st.battery_percent = all_weighted && wsum > 0 ? wpct / wsum : psum / pn;

  auto battery_with = [&](std::initializer_list<const char*> statuses) -> const Battery* {
    for (const auto& b : batteries)
      for (const char* s : statuses)
        if (b.status == s) return &b;
    return nullptr;
  };
  if (!online_source.empty()) {
    st.external_power = true;
    st.detail = online_source;
  } else if (const Battery* b = battery_with({"Charging", "Full"})) {
    st.external_power = true;
    st.detail = b->name + " " + b->status;
  } else if (!offline_source.empty()) {
    st.external_power = false;
    st.detail = offline_source;
  } else if (const Battery* b2 = battery_with({"Discharging"})) {
    st.external_power = false;
    st.detail = b2->name + " Discharging";
  } else if (system_supplies == 0) {
    st.external_power = true;
    st.detail = "no power supply listed under " + dir.string() + ": assuming a machine on mains power";
  } else {
    st.detail = "cannot tell from " + dir.string() + " whether external power is connected";
  }
  return st;
}

}  // namespace nl
