#include "nightlora/job/time_window.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <string_view>

#include "nightlora/util/error.h"

namespace nl {

namespace {
constexpr double kDay = 86400;
double wrap(double s) {
  s = std::fmod(s, kDay);
  return s < 0 ? s + kDay : s;
}

// "H:MM-H:MM" or "HH:MM-HH:MM", spaces allowed around each time and the dash: the four
// numbers, or false. (A scanner of its own: <regex> cost ~8 s of compile per build for it.)
bool read_window(std::string_view s, int (&v)[4]) {
  size_t i = 0;
  auto spaces = [&] {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  };
  auto digits = [&](size_t min, size_t max, int& out) {
    size_t start = i;
    for (out = 0; i < s.size() && i - start < max && s[i] >= '0' && s[i] <= '9'; ++i) out = out * 10 + (s[i] - '0');
    return i - start >= min;
  };
  auto expect = [&](char c) { return i < s.size() && s[i] == c && ++i; };
  auto time = [&](int& h, int& m) { return digits(1, 2, h) && expect(':') && digits(2, 2, m); };
  spaces();
  if (!time(v[0], v[1])) return false;
  spaces();
  if (!expect('-')) return false;
  spaces();
  if (!time(v[2], v[3])) return false;
  spaces();
  return i == s.size();
}
}  // namespace

TimeWindow TimeWindow::parse(const std::string& text, const std::string& flag) {
  const char* hint = "write the window as HH:MM-HH:MM in 24-hour local time, e.g. 23:00-07:00";
  int v[4];
  if (!read_window(text, v)) fail(flag, "cannot read the time window \"" + text + "\"", hint);
  int h1 = v[0], m1 = v[1], h2 = v[2], m2 = v[3];
  // 24:00 is allowed as an end ("18:00-24:00").
  if (h1 > 23 || m1 > 59 || h2 > 24 || m2 > 59 || (h2 == 24 && m2 != 0))
    fail(flag, "\"" + text + "\" is not a valid time of day", hint);
  TimeWindow w;
  w.start_ = h1 * 60 + m1;
  w.end_ = (h2 * 60 + m2) % 1440;
  if (w.start_ == w.end_) fail(flag, "the window \"" + text + "\" is empty (start equals end)", "to run at any time, give no window");
  return w;
}

bool TimeWindow::contains(double sod) const {
  double t = wrap(sod), s = start_ * 60.0, e = end_ * 60.0;
  return s < e ? (t >= s && t < e) : (t >= s || t < e);  // s > e: the window crosses midnight
}

double TimeWindow::seconds_until_open(double sod) const {
  if (contains(sod)) return 0;
  return wrap(start_ * 60.0 - wrap(sod));
}

double TimeWindow::seconds_until_close(double sod) const {
  if (!contains(sod)) return 0;
  double d = wrap(end_ * 60.0 - wrap(sod));
  return d == 0 ? kDay : d;
}

std::string TimeWindow::text() const {
  char buf[48];
  std::snprintf(buf, sizeof(buf), "%02d:%02d-%02d:%02d", start_ / 60, start_ % 60, end_ / 60, end_ % 60);
  return buf;
}

std::string format_duration(double seconds) {
  if (std::isinf(seconds) && seconds > 0) return "unlimited";
  if (!(seconds > 0)) return "0s";  // negative or NaN
  char buf[48];
  // Below 10 s the fraction matters (a 0.5 s budget must not read "0s"): 3 significant digits.
  if (seconds < 9.995) {
    std::snprintf(buf, sizeof(buf), "%.3gs", seconds);
    return buf;
  }
  long long s = static_cast<long long>(std::llround(seconds));
  if (s >= 3600) std::snprintf(buf, sizeof(buf), "%lldh%02lldm", s / 3600, (s % 3600) / 60);
  else if (s >= 60) std::snprintf(buf, sizeof(buf), "%lldm%02llds", s / 60, s % 60);
  else std::snprintf(buf, sizeof(buf), "%llds", s);
  return buf;
}

}  // namespace nl
