#include "nightlora/host/memory_budget.h"

#include <cstdio>
#include <fstream>
#include <sstream>

namespace nl {

namespace {

std::string gib(size_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

}  // namespace

MemoryState read_memory_state(const std::string& proc_root) {
  MemoryState s;
  std::ifstream meminfo(proc_root + "/meminfo");
  std::string line;
  while (std::getline(meminfo, line)) {
    std::istringstream in(line);
    std::string key;
    unsigned long long kib = 0;
    if (!(in >> key >> kib)) continue;
    if (key == "MemTotal:") s.total = static_cast<size_t>(kib) * 1024;
    if (key == "MemAvailable:") s.available = static_cast<size_t>(kib) * 1024;
  }
  if (s.total == 0 || s.available == 0 || s.available > s.total) s.total = s.available = 0;
  // "some avg10=0.00 avg60=0.00 avg300=0.00 total=0"
  std::ifstream pressure(proc_root + "/pressure/memory");
  while (std::getline(pressure, line)) {
    if (line.rfind("some ", 0) != 0) continue;
    const size_t at = line.find("avg10=");
    if (at == std::string::npos) continue;
    double v = -1;
    if (std::sscanf(line.c_str() + at + 6, "%lf", &v) == 1 && v >= 0 && v <= 100) s.pressure_some_avg10 = v;
  }
  return s;
}

MemoryBudget default_memory_budget(const MemoryState& s, bool background) {
  if (s.total == 0) return {0, "the machine's free memory is unknown (no /proc/meminfo)"};
  if (s.available * 10 < s.total)
    return {0, "memory pressure: " + gib(s.available) + " available of " + gib(s.total)};
  if (s.pressure_some_avg10 > 5.0) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "memory pressure: tasks stalled on memory %.1f%% of the last 10 s",
                  s.pressure_some_avg10);
    return {0, buf};
  }
  if (background) return {s.available / 4, "a quarter of the " + gib(s.available) + " available (background)"};
  return {s.available / 2, "half of the " + gib(s.available) + " available"};
}

}  // namespace nl
