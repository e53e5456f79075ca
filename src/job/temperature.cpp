#include "nightlora/job/temperature.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "nightlora/util/error.h"

namespace nl {

namespace {

namespace fs = std::filesystem;

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// First line of a small file, without trailing whitespace; empty optional when unreadable.
std::optional<std::string> read_line(const fs::path& p) {
  std::ifstream f(p);
  if (!f) return std::nullopt;
  std::string line;
  std::getline(f, line);
  if (f.bad()) return std::nullopt;
  while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
  return line;
}

// Files matching <dir>/<prefix>* in name order (thermal_zone10 after thermal_zone9).
std::vector<fs::path> entries_with_prefix(const fs::path& dir, const std::string& prefix) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (name.rfind(prefix, 0) == 0) out.push_back(it->path());
  }
  std::sort(out.begin(), out.end(), [](const fs::path& a, const fs::path& b) {
    std::string x = a.filename().string(), y = b.filename().string();
    return x.size() != y.size() ? x.size() < y.size() : x < y;
  });
  return out;
}

// A set of sensor files; a reading is the hottest one that reads plausibly.
class MaxOfFilesSource : public TemperatureSource {
 public:
  struct Sensor {
    fs::path file;
    std::string label;
  };
  MaxOfFilesSource(std::vector<Sensor> sensors, std::string what) : sensors_(std::move(sensors)), what_(std::move(what)) {}

  TempReading read() override {
    TempReading r;
    for (const auto& s : sensors_) {
      auto line = read_line(s.file);
      if (!line) continue;
      auto c = parse_temperature(*line);
      if (c && (!r.celsius || *c > *r.celsius)) {
        r.celsius = c;
        r.sensor = s.label;
      }
    }
    if (!r.celsius) r.problem = sensors_.empty() ? "no " + what_ + " found" : "none of the " + what_ + " gave a plausible reading";
    return r;
  }

  std::string describe() const override { return what_ + " (hottest of " + std::to_string(sensors_.size()) + ")"; }
  bool empty() const { return sensors_.empty(); }

 private:
  std::vector<Sensor> sensors_;
  std::string what_;
};

class FileSource : public TemperatureSource {
 public:
  explicit FileSource(std::string path) : path_(std::move(path)) {}
  TempReading read() override {
    TempReading r;
    r.sensor = path_;
    auto line = read_line(path_);
    if (!line) {
      r.problem = "cannot read " + path_;
      return r;
    }
    r.celsius = parse_temperature(*line);
    if (!r.celsius) r.problem = path_ + " does not hold a plausible temperature: \"" + line->substr(0, 40) + "\"";
    return r;
  }
  std::string describe() const override { return "file " + path_; }

 private:
  std::string path_;
};

// Runs `sh -c command` with a deadline, returning its stdout (or nothing on failure/timeout).
// A sensor command that hangs must not hang the training job with it.
std::optional<std::string> run_with_deadline(const std::string& command, double timeout_s, std::string* problem) {
  // Android has no /bin/sh; its shell is /system/bin/sh (the static arm64 build runs there).
  const char* shell = ::access("/bin/sh", X_OK) == 0 ? "/bin/sh" : "/system/bin/sh";
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    *problem = "cannot create a pipe";
    return std::nullopt;
  }
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    *problem = "cannot fork";
    return std::nullopt;
  }
  if (pid == 0) {
    ::setpgid(0, 0);  // its own process group, so a timeout kills the command's children too
    ::dup2(fds[1], 1);
    int devnull = ::open("/dev/null", O_RDWR);
    if (devnull >= 0) ::dup2(devnull, 0);
    ::execl(shell, "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::setpgid(pid, pid);
  ::close(fds[1]);
  std::string out;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  bool timed_out = false;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    int pr = ::poll(&p, 1, static_cast<int>(left));
    if (pr < 0 && errno == EINTR) continue;
    if (pr <= 0) {
      timed_out = pr == 0;
      break;
    }
    char buf[512];
    ssize_t n = ::read(fds[0], buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (out.size() < 4096) out.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  if (timed_out) ::kill(-pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "command did not finish within %g s", timeout_s);
    *problem = buf;
    return std::nullopt;
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    *problem = "command failed (exit status " + std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) + ")";
    return std::nullopt;
  }
  return out;
}

class CommandSource : public TemperatureSource {
 public:
  CommandSource(std::string cmd, double timeout_s) : cmd_(std::move(cmd)), timeout_s_(timeout_s) {}
  TempReading read() override {
    TempReading r;
    r.sensor = "command";
    std::string problem;
    auto out = run_with_deadline(cmd_, timeout_s_, &problem);
    if (!out) {
      r.problem = "--temp-cmd \"" + cmd_ + "\": " + problem;
      return r;
    }
    std::string first = out->substr(0, out->find('\n'));
    r.celsius = parse_temperature(first);
    if (!r.celsius) r.problem = "--temp-cmd \"" + cmd_ + "\" printed no plausible temperature: \"" + first.substr(0, 40) + "\"";
    return r;
  }
  std::string describe() const override { return "command " + cmd_; }

 private:
  std::string cmd_;
  double timeout_s_;
};

}  // namespace

std::optional<double> parse_temperature(const std::string& text) {
  const char* s = text.c_str();
  while (std::isspace(static_cast<unsigned char>(*s))) ++s;
  char* end = nullptr;
  double v = std::strtod(s, &end);
  if (end == s || !std::isfinite(v)) return std::nullopt;
  while (std::isspace(static_cast<unsigned char>(*end))) ++end;
  if (*end != '\0') return std::nullopt;
  if (std::fabs(v) >= 1000) v /= 1000;
  if (v < -40 || v > 150) return std::nullopt;
  return v;
}

std::unique_ptr<TemperatureSource> thermal_zone_source(const std::string& sysfs_root, const std::string& type_filter) {
  fs::path dir = fs::path(sysfs_root) / "class" / "thermal";
  std::vector<MaxOfFilesSource::Sensor> sensors;
  std::string want = lower(type_filter);
  for (const auto& zone : entries_with_prefix(dir, "thermal_zone")) {
    std::string type = read_line(zone / "type").value_or("");
    if (!want.empty() && lower(type).find(want) == std::string::npos) continue;
    std::string label = zone.filename().string() + (type.empty() ? "" : " (" + type + ")");
    sensors.push_back({zone / "temp", label});
  }
  std::string what = "thermal zones under " + dir.string() + (want.empty() ? "" : " of type *" + type_filter + "*");
  return std::make_unique<MaxOfFilesSource>(std::move(sensors), what);
}

std::unique_ptr<TemperatureSource> hwmon_source(const std::string& sysfs_root) {
  fs::path dir = fs::path(sysfs_root) / "class" / "hwmon";
  std::vector<MaxOfFilesSource::Sensor> sensors;
  for (const auto& chip : entries_with_prefix(dir, "hwmon")) {
    std::string name = read_line(chip / "name").value_or("");
    for (const auto& f : entries_with_prefix(chip, "temp")) {
      std::string fn = f.filename().string();
      if (fn.size() < 7 || fn.compare(fn.size() - 6, 6, "_input") != 0) continue;
      std::string label = chip.filename().string() + (name.empty() ? "" : " (" + name + ")") + " " + fn;
      sensors.push_back({f, label});
    }
  }
  return std::make_unique<MaxOfFilesSource>(std::move(sensors), "hwmon sensors under " + dir.string());
}

std::unique_ptr<TemperatureSource> file_source(const std::string& path) { return std::make_unique<FileSource>(path); }

std::unique_ptr<TemperatureSource> command_source(const std::string& command, double timeout_s) {
  return std::make_unique<CommandSource>(command, timeout_s);
}

std::unique_ptr<TemperatureSource> find_temperature_source(const TempSourceOptions& opt, std::string* why_none) {
  // A source the user named must work: silently pacing on something else would surprise them.
  auto explicit_source = [](std::unique_ptr<TemperatureSource> s, const std::string& flag) {
    TempReading r = s->read();
    if (!r.celsius) fail(flag, r.problem, "check the path or command; it must give a temperature in degrees or millidegrees Celsius");
    return s;
  };
  if (!opt.temp_file.empty()) return explicit_source(file_source(opt.temp_file), "--temp-file");
  if (!opt.temp_cmd.empty()) return explicit_source(command_source(opt.temp_cmd), "--temp-cmd");

  std::vector<std::string> tried;
  for (auto make : {+[](const TempSourceOptions& o) { return thermal_zone_source(o.sysfs_root, o.zone_filter); },
                    +[](const TempSourceOptions& o) { return hwmon_source(o.sysfs_root); }}) {
    auto s = make(opt);
    TempReading r = s->read();
    if (r.celsius) return s;
    tried.push_back(r.problem);
  }
  if (why_none) {
    std::string w;
    for (const auto& t : tried) w += (w.empty() ? "" : "; ") + t;
    *why_none = w;
  }
  return nullptr;
}

}  // namespace nl
