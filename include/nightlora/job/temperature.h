// Where a temperature comes from: the kernel's thermal zones (Linux, Android), hwmon sensors,
// a file the user names (--temp-file) or a command the user gives (--temp-cmd).
//
// Every reader takes the root of the tree it reads ("/sys" on a real machine), so tests run
// them against fake sysfs trees. A reading that cannot be had is reported as such, with the
// reason; it is never replaced by a guess.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace nl {

struct TempReading {
  std::optional<double> celsius;  // empty: no reading (see `problem`)
  std::string sensor;             // which sensor gave the value, e.g. "thermal_zone3 (cpu-0-0)"
  std::string problem;            // why there is no reading
};

class TemperatureSource {
 public:
  virtual ~TemperatureSource() = default;
  virtual TempReading read() = 0;
  // A line for logs and reports: "thermal zones under /sys/class/thermal (max of 4)".
  virtual std::string describe() const = 0;
};

// Parses a sensor value. Linux sysfs writes millidegrees Celsius ("45000"); some Android
// drivers and user scripts write degrees ("45" or "45.5"). Values of magnitude >= 1000 are
// taken as millidegrees, smaller ones as degrees. Empty when the text is not a number or the
// result is implausible (below -40 or above 150 degrees: unavailable sensors often report
// -273000 or 0x7fffffff).
std::optional<double> parse_temperature(const std::string& text);

// The hottest of /<sysfs_root>/class/thermal/thermal_zone*/temp. With `type_filter`
// non-empty, only zones whose `type` contains it (case-insensitive), e.g. "cpu" or "battery".
std::unique_ptr<TemperatureSource> thermal_zone_source(const std::string& sysfs_root = "/sys",
                                                       const std::string& type_filter = "");

// The hottest of /<sysfs_root>/class/hwmon/hwmon*/temp*_input (chip name from `name`).
std::unique_ptr<TemperatureSource> hwmon_source(const std::string& sysfs_root = "/sys");

// A file holding one number (degrees or millidegrees, see parse_temperature), re-read on
// every reading: a user's script can keep it up to date.
std::unique_ptr<TemperatureSource> file_source(const std::string& path);

// A shell command printing a number (degrees or millidegrees) on its first line of output;
// run on every reading. A command that fails, prints no number or runs longer than
// `timeout_s` (it is then killed, with its children) gives no reading.
std::unique_ptr<TemperatureSource> command_source(const std::string& command, double timeout_s = 10);

struct TempSourceOptions {
  std::string sysfs_root = "/sys";
  std::string temp_file;    // --temp-file: used alone when set
  std::string temp_cmd;     // --temp-cmd: used alone when set
  std::string zone_filter;  // --temp-zone: restricts thermal zones by type
};

// The source a job should use: the user's file or command when given (an error when it
// cannot be read now: the user asked for it explicitly), else thermal zones, else hwmon.
// Returns nullptr when nothing on this machine gives a temperature; `why_none` then lists
// what was tried, and the caller falls back to throughput-based throttling detection.
std::unique_ptr<TemperatureSource> find_temperature_source(const TempSourceOptions& opt, std::string* why_none = nullptr);

}  // namespace nl
