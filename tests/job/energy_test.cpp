// Energy from fake RAPL and battery trees: counters, wraparound, and "unavailable" (with the
// reason) rather than an invented figure.
#include <filesystem>

#include "nightlora/job/energy.h"
#include "test_util.h"

namespace {

namespace fs = std::filesystem;
using nltest::TempDir;
using nltest::write_text;

fs::path rapl_zone(const fs::path& root, const std::string& zone, const std::string& name, uint64_t uj, uint64_t range) {
  fs::path d = root / "class/powercap" / zone;
  fs::create_directories(d);
  write_text(d / "name", name + "\n");
  write_text(d / "energy_uj", std::to_string(uj) + "\n");
  write_text(d / "max_energy_range_uj", std::to_string(range) + "\n");
  return d;
}

TEST(Energy, RaplSumsPackagesAndHandlesWraparound) {
  TempDir t;
  const uint64_t range = 262143328850;
  fs::path p0 = rapl_zone(t.path, "intel-rapl:0", "package-0", range - 1000000, range);
  fs::path p1 = rapl_zone(t.path, "intel-rapl:1", "package-1", 5000000, range);
  fs::path sub = rapl_zone(t.path, "intel-rapl:0:0", "core", 123, range);  // part of package-0: not counted
  nl::EnergyMeter m = nl::EnergyMeter::open(t.path.string());
  ASSERT_TRUE(m.available()) << m.why_unavailable();
  EXPECT_EQ(m.source(), "RAPL package-0, package-1");
  EXPECT_DOUBLE_EQ(*m.joules(), 0);
  // package-0 wraps: from range−1 J to 2 J is 3 J; package-1 adds 4 J. The subzone's change is ignored.
  write_text(p0 / "energy_uj", "2000000\n");
  write_text(p1 / "energy_uj", "9000000\n");
  write_text(sub / "energy_uj", "999999999\n");
  EXPECT_NEAR(*m.joules(), 7.0, 1e-9);
  write_text(p0 / "energy_uj", "2500000\n");
  EXPECT_NEAR(*m.joules(), 7.5, 1e-9);
}

TEST(Energy, RaplPsysIsUsedAloneWhenPresent) {
  TempDir t;
  rapl_zone(t.path, "intel-rapl:0", "package-0", 0, 1000000000);
  fs::path ps = rapl_zone(t.path, "intel-rapl:1", "psys", 0, 1000000000);
  nl::EnergyMeter m = nl::EnergyMeter::open(t.path.string());
  EXPECT_EQ(m.source(), "RAPL psys");
  write_text(ps / "energy_uj", "3000000");
  EXPECT_NEAR(*m.joules(), 3.0, 1e-9);
}

void battery(const fs::path& root, const std::string& status) {
  fs::path b = root / "class/power_supply/BAT0";
  fs::create_directories(b);
  write_text(b / "type", "Battery");
  write_text(b / "status", status);
}

TEST(Energy, BatteryDrainFromEnergyNow) {
  TempDir t;
  battery(t.path, "Discharging");
  fs::path b = t / "class/power_supply/BAT0";
  write_text(b / "energy_now", "40000000");  // µWh
  nl::EnergyMeter m = nl::EnergyMeter::open(t.path.string());
  ASSERT_TRUE(m.available()) << m.why_unavailable();
  EXPECT_NE(m.source().find("energy_now"), std::string::npos);
  write_text(b / "energy_now", "39000000");  // 1 Wh used = 3600 J
  EXPECT_NEAR(*m.joules(), 3600, 1e-6);
  // The charger is plugged in: from now on the level does not measure consumption.
  write_text(b / "status", "Charging");
  EXPECT_FALSE(m.joules());
  EXPECT_FALSE(m.available());
  EXPECT_NE(m.why_unavailable().find("Charging"), std::string::npos) << m.why_unavailable();
}

TEST(Energy, BatteryDrainFromChargeAndVoltage) {
  TempDir t;
  battery(t.path, "Discharging");
  fs::path b = t / "class/power_supply/BAT0";
  write_text(b / "charge_now", "3000000");   // µAh
  write_text(b / "voltage_now", "4000000");  // µV
  nl::EnergyMeter m = nl::EnergyMeter::open(t.path.string());
  ASSERT_TRUE(m.available()) << m.why_unavailable();
  write_text(b / "charge_now", "2900000");   // 0.1 Ah
  write_text(b / "voltage_now", "3800000");  // at a mean of 3.9 V: 0.39 Wh = 1404 J
  EXPECT_NEAR(*m.joules(), 1404, 1e-6);
}

TEST(Energy, UnavailableIsSaidWithTheReason) {
  TempDir t;
  nl::EnergyMeter none = nl::EnergyMeter::open(t.path.string());
  EXPECT_FALSE(none.available());
  EXPECT_FALSE(none.joules());
  EXPECT_NE(none.why_unavailable().find("no RAPL"), std::string::npos) << none.why_unavailable();
  EXPECT_NE(none.why_unavailable().find("no battery"), std::string::npos) << none.why_unavailable();

  battery(t.path, "Charging");  // overnight on the charger: the battery cannot tell
  write_text(t / "class/power_supply/BAT0/energy_now", "40000000");
  nl::EnergyMeter charging = nl::EnergyMeter::open(t.path.string());
  EXPECT_FALSE(charging.available());
  EXPECT_NE(charging.why_unavailable().find("Charging"), std::string::npos) << charging.why_unavailable();

  // A RAPL counter that cannot be read (here: garbage; on real machines: root-only).
  fs::path z = rapl_zone(t.path, "intel-rapl:0", "package-0", 0, 1000);
  write_text(z / "energy_uj", "n/a");
  nl::EnergyMeter broken = nl::EnergyMeter::open(t.path.string());
  EXPECT_FALSE(broken.available());
  EXPECT_NE(broken.why_unavailable().find("energy_uj"), std::string::npos) << broken.why_unavailable();
}

}  // namespace
