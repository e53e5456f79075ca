#include "nightlora/job/energy.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace nl {

namespace {

namespace fs = std::filesystem;

std::optional<std::string> read_attr(const fs::path& p, std::string* err = nullptr) {
  std::ifstream f(p);
  if (!f) {
    if (err) *err = std::strerror(errno);
    return std::nullopt;
  }
  std::string s;
  std::getline(f, s);
  if (f.bad()) {
    if (err) *err = "read error";
    return std::nullopt;
  }
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  return s;
}

std::optional<double> read_num(const fs::path& p, std::string* err = nullptr) {
  auto s = read_attr(p, err);
  if (!s) return std::nullopt;
  char* end = nullptr;
  double v = std::strtod(s->c_str(), &end);
  if (s->empty() || end == s->c_str() || *end != '\0' || v < 0) {
    if (err) *err = "not a number: \"" + s->substr(0, 30) + "\"";
    return std::nullopt;
  }
  return v;
}

constexpr double kJoulesPerMicroWattHour = 3.6e-3;
constexpr double kJoulesPerMicroAmpHourMicroVolt = 3.6e-9;

}  // namespace

EnergyMeter EnergyMeter::open(const std::string& sysfs_root) {
  EnergyMeter m;
  std::vector<std::string> tried;

  // RAPL: top-level zones are "intel-rapl:N" (subzones "intel-rapl:N:M" are parts of them and
  // would count twice). "psys" covers the whole platform including the packages, so when it
  // exists it is used alone.
  fs::path pc = fs::path(sysfs_root) / "class" / "powercap";
  std::vector<fs::path> zones;
  std::error_code ec;
  for (fs::directory_iterator it(pc, ec), end; !ec && it != end; it.increment(ec)) {
    std::string n = it->path().filename().string();
    if (n.rfind("intel-rapl:", 0) == 0 && std::count(n.begin(), n.end(), ':') == 1) zones.push_back(it->path());
  }
  std::sort(zones.begin(), zones.end());
  std::vector<fs::path> use;
  for (const auto& z : zones)
    if (read_attr(z / "name").value_or("") == "psys") use = {z};
  if (use.empty()) use = zones;
  std::string rapl_err;
  for (const auto& z : use) {
    std::string err;
    auto e = read_num(z / "energy_uj", &err);
    auto r = read_num(z / "max_energy_range_uj");
    if (!e || !r || *r <= 0) {
      rapl_err = (z / "energy_uj").string() + ": " + (e ? "no max_energy_range_uj" : err);
      if (err == std::strerror(EACCES)) rapl_err += " (RAPL counters are readable only by root since Linux 5.10)";
      m.rapl_.clear();
      break;
    }
    m.rapl_.push_back({(z / "energy_uj").string(), *r, *e});
    m.source_ += (m.source_.empty() ? "RAPL " : ", ") + read_attr(z / "name").value_or(z.filename().string());
  }
  if (!m.rapl_.empty()) {
    m.kind_ = Kind::Rapl;
    return m;
  }
  m.source_.clear();
  tried.push_back(zones.empty() ? "no RAPL counters under " + pc.string() : rapl_err);

  // A battery that is discharging: its drain is the device's consumption.
  fs::path ps = fs::path(sysfs_root) / "class" / "power_supply";
  std::vector<fs::path> sups;
  for (fs::directory_iterator it(ps, ec), end; !ec && it != end; it.increment(ec)) sups.push_back(it->path());
  std::sort(sups.begin(), sups.end());
  bool saw_battery = false;
  for (const auto& s : sups) {
    if (read_attr(s / "type").value_or("") != "Battery" || read_attr(s / "scope").value_or("") == "Device") continue;
    saw_battery = true;
    std::string status = read_attr(s / "status").value_or("");
    std::string name = s.filename().string();
    if (status != "Discharging") {
      tried.push_back("battery " + name + " is " + (status.empty() ? "of unknown status" : status) +
                      ": its level does not measure consumption unless discharging");
      continue;
    }
    if (auto e = read_num(s / "energy_now")) {
      m.kind_ = Kind::BatteryEnergy;
      m.last_level_ = *e;
      m.source_ = "battery " + name + " drain (energy_now; whole device)";
    } else if (auto c = read_num(s / "charge_now"), v = read_num(s / "voltage_now"); c && v) {
      m.kind_ = Kind::BatteryCharge;
      m.last_level_ = *c;
      m.last_voltage_ = *v;
      m.source_ = "battery " + name + " drain (charge_now x voltage_now; whole device)";
    } else {
      tried.push_back("battery " + name + " reports neither energy_now nor charge_now with voltage_now");
      continue;
    }
    m.battery_dir_ = s.string();
    return m;
  }
  if (!saw_battery) tried.push_back("no battery under " + ps.string());
  for (const auto& t : tried) m.problem_ += (m.problem_.empty() ? "" : "; ") + t;
  return m;
}

std::optional<double> EnergyMeter::joules() {
  if (!available()) return std::nullopt;
  if (kind_ == Kind::Rapl) {
    for (auto& c : rapl_) {
      std::string err;
      auto e = read_num(c.file, &err);
      if (!e) {
        problem_ = c.file + ": " + err;
        return std::nullopt;
      }
      double d = *e - c.last_uj;
      if (d < 0) d += c.range_uj;  // the counter wrapped past max_energy_range_uj back to 0
      c.last_uj = *e;
      total_j_ += d * 1e-6;
    }
    return total_j_;
  }
  fs::path dir(battery_dir_);
  std::string status = read_attr(dir / "status").value_or("");
  // Once it charges, the battery level mixes what the job used with what the charger gave.
  auto stop = [&](const std::string& why) -> std::optional<double> {
    problem_ = "battery " + dir.filename().string() + " " + why + ": energy from then on cannot be measured";
    return std::nullopt;
  };
  if (status != "Discharging") return stop("is " + (status.empty() ? std::string("of unknown status") : status));
  if (kind_ == Kind::BatteryEnergy) {
    auto e = read_num(dir / "energy_now");
    if (!e) return stop("stopped reporting energy_now");
    if (*e > last_level_) return stop("gained energy");
    total_j_ += (last_level_ - *e) * kJoulesPerMicroWattHour;
    last_level_ = *e;
  } else {
    auto c = read_num(dir / "charge_now");
    auto v = read_num(dir / "voltage_now");
    if (!c || !v) return stop("stopped reporting charge_now/voltage_now");
    if (*c > last_level_) return stop("gained charge");
    // The charge drawn between two samples, at the mean voltage over that interval.
    total_j_ += (last_level_ - *c) * 0.5 * (last_voltage_ + *v) * kJoulesPerMicroAmpHourMicroVolt;
    last_level_ = *c;
    last_voltage_ = *v;
  }
  return total_j_;
}

}  // namespace nl
