// Temperature sources against fake sysfs trees, a user file and a user command.
#include <filesystem>

#include "nightlora/job/temperature.h"
#include "nightlora/util/error.h"
#include "test_util.h"

namespace {

namespace fs = std::filesystem;
using nltest::TempDir;
using nltest::write_text;

void zone(const fs::path& root, int n, const std::string& type, const std::string& temp) {
  fs::path d = root / "class" / "thermal" / ("thermal_zone" + std::to_string(n));
  fs::create_directories(d);
  write_text(d / "type", type + "\n");
  if (!temp.empty()) write_text(d / "temp", temp + "\n");
}

TEST(Temperature, ParsesDegreesAndMillidegrees) {
  EXPECT_DOUBLE_EQ(*nl::parse_temperature("45000"), 45.0);
  EXPECT_DOUBLE_EQ(*nl::parse_temperature("45000\n"), 45.0);
  EXPECT_DOUBLE_EQ(*nl::parse_temperature(" 45.5 "), 45.5);
  EXPECT_DOUBLE_EQ(*nl::parse_temperature("-5000"), -5.0);
  EXPECT_DOUBLE_EQ(*nl::parse_temperature("38"), 38.0);
  EXPECT_FALSE(nl::parse_temperature(""));
  EXPECT_FALSE(nl::parse_temperature("hot"));
  EXPECT_FALSE(nl::parse_temperature("45 C"));
  EXPECT_FALSE(nl::parse_temperature("-273000"));      // what a missing sensor often reports
  EXPECT_FALSE(nl::parse_temperature("2147483647"));   // and this
  EXPECT_FALSE(nl::parse_temperature("nan"));
}

TEST(Temperature, ThermalZonesGiveTheHottestPlausibleZone) {
  TempDir t;
  zone(t.path, 0, "acpitz", "41000");
  zone(t.path, 1, "x86_pkg_temp", "57500");
  zone(t.path, 2, "battery", "-273000");  // broken sensor: ignored
  zone(t.path, 10, "cpu-1-0", "52000");
  auto s = nl::thermal_zone_source(t.path.string());
  nl::TempReading r = s->read();
  ASSERT_TRUE(r.celsius) << r.problem;
  EXPECT_DOUBLE_EQ(*r.celsius, 57.5);
  EXPECT_EQ(r.sensor, "thermal_zone1 (x86_pkg_temp)");
  EXPECT_NE(s->describe().find("hottest of 4"), std::string::npos) << s->describe();

  // Re-read on every call: a changing sensor is followed.
  write_text(t / "class/thermal/thermal_zone10/temp", "61000\n");
  EXPECT_DOUBLE_EQ(*s->read().celsius, 61.0);

  // A type filter picks zones by their type.
  auto cpu = nl::thermal_zone_source(t.path.string(), "CPU");
  EXPECT_DOUBLE_EQ(*cpu->read().celsius, 61.0);
  auto acpi = nl::thermal_zone_source(t.path.string(), "acpi");
  EXPECT_DOUBLE_EQ(*acpi->read().celsius, 41.0);
}

TEST(Temperature, NoZonesOrNoReadableZoneIsReportedNotGuessed) {
  TempDir t;
  nl::TempReading r = nl::thermal_zone_source(t.path.string())->read();
  EXPECT_FALSE(r.celsius);
  EXPECT_NE(r.problem.find("no thermal zones"), std::string::npos) << r.problem;
  zone(t.path, 0, "cpu", "");  // a zone without a temp file
  zone(t.path, 1, "gpu", "garbage");
  r = nl::thermal_zone_source(t.path.string())->read();
  EXPECT_FALSE(r.celsius);
  EXPECT_NE(r.problem.find("plausible"), std::string::npos) << r.problem;
}

TEST(Temperature, HwmonReadsTempInputs) {
  TempDir t;
  fs::path h0 = t / "class/hwmon/hwmon0", h1 = t / "class/hwmon/hwmon1";
  fs::create_directories(h0);
  fs::create_directories(h1);
  write_text(h0 / "name", "nvme\n");
  write_text(h0 / "temp1_input", "39850\n");
  write_text(h0 / "temp1_label", "Composite\n");
  write_text(h1 / "name", "coretemp\n");
  write_text(h1 / "temp1_input", "48000\n");
  write_text(h1 / "temp2_input", "66000\n");
  write_text(h1 / "temp2_max", "100000\n");  // a limit, not a reading
  write_text(h1 / "temp2_crit", "105000\n");
  nl::TempReading r = nl::hwmon_source(t.path.string())->read();
  ASSERT_TRUE(r.celsius) << r.problem;
  EXPECT_DOUBLE_EQ(*r.celsius, 66.0);
  EXPECT_EQ(r.sensor, "hwmon1 (coretemp) temp2_input");
}

TEST(Temperature, UserFileAndCommand) {
  TempDir t;
  write_text(t / "temp", "43.25\n");
  nl::TempReading r = nl::file_source((t / "temp").string())->read();
  EXPECT_DOUBLE_EQ(*r.celsius, 43.25);
  write_text(t / "temp", "nonsense");
  r = nl::file_source((t / "temp").string())->read();
  EXPECT_FALSE(r.celsius);
  EXPECT_NE(r.problem.find("plausible"), std::string::npos);

  EXPECT_DOUBLE_EQ(*nl::command_source("echo 51500")->read().celsius, 51.5);
  EXPECT_DOUBLE_EQ(*nl::command_source("printf '47\\nmore lines\\n'")->read().celsius, 47.0);
  r = nl::command_source("exit 3")->read();
  EXPECT_FALSE(r.celsius);
  EXPECT_NE(r.problem.find("exit status 3"), std::string::npos) << r.problem;
  r = nl::command_source("echo warm")->read();
  EXPECT_FALSE(r.celsius);
  // A hanging command is killed (with its children) instead of hanging the job.
  r = nl::command_source("sleep 30; echo 40", 0.2)->read();
  EXPECT_FALSE(r.celsius);
  EXPECT_NE(r.problem.find("did not finish"), std::string::npos) << r.problem;
}

TEST(Temperature, FindPrefersUserSourcesThenZonesThenHwmon) {
  TempDir t;
  std::string why;
  nl::TempSourceOptions o;
  o.sysfs_root = t.path.string();
  EXPECT_EQ(nl::find_temperature_source(o, &why), nullptr);
  EXPECT_NE(why.find("thermal zones"), std::string::npos) << why;
  EXPECT_NE(why.find("hwmon"), std::string::npos) << why;

  fs::create_directories(t / "class/hwmon/hwmon0");
  write_text(t / "class/hwmon/hwmon0/temp1_input", "40000");
  auto s = nl::find_temperature_source(o);
  ASSERT_NE(s, nullptr);
  EXPECT_NE(s->describe().find("hwmon"), std::string::npos);

  zone(t.path, 0, "cpu", "50000");
  s = nl::find_temperature_source(o);
  EXPECT_NE(s->describe().find("thermal zones"), std::string::npos);

  o.temp_cmd = "echo 33";
  EXPECT_DOUBLE_EQ(*nl::find_temperature_source(o)->read().celsius, 33.0);
  // A user source that does not work is an error, not a silent fallback.
  o.temp_cmd = "";
  o.temp_file = (t / "missing").string();
  EXPECT_THROW(nl::find_temperature_source(o), nl::Error);
}

}  // namespace
