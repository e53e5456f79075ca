#include "nightlora/report/number_format.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace nl {

std::string format_number(double v, int digits, double resolution) {
  if (!std::isfinite(v)) return std::isnan(v) ? "NaN" : (v > 0 ? "inf" : "-inf");
  if (v == 0 || std::fabs(v) < resolution / 2) return "0";
  char buf[64];
  const double a = std::fabs(v);
  if (a >= 1e6 || a < 1e-3) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, v);
    return buf;
  }
  // Fixed notation with enough decimals for `digits` significant ones, trailing zeros cut.
  int decimals = std::max(0, digits - 1 - static_cast<int>(std::floor(std::log10(a))));
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  std::string s = buf;
  if (s.find('.') != std::string::npos) {
    while (!s.empty() && s.back() == '0') s.pop_back();
    if (!s.empty() && s.back() == '.') s.pop_back();
  }
  return s == "-0" ? "0" : s;
}

std::string format_seconds(double s, double resolution) {
  const double a = std::fabs(s);
  if (!std::isfinite(s)) return format_number(s) + " s";
  if (a < std::max(resolution, 0.0) / 2 || a == 0) return "0 s";
  if (a < 1e-3) return format_number(s * 1e6, 3) + " µs";
  if (a < 1) return format_number(s * 1e3, 3) + " ms";
  if (a < 120) return format_number(s, 3) + " s";
  if (a < 3 * 3600) return format_number(s / 60, 3) + " min";
  return format_number(s / 3600, 3) + " h";
}

std::string format_share(double part, double whole) {
  if (!(whole > 0) || !std::isfinite(part)) return "0%";
  const double pct = 100.0 * std::max(0.0, part) / whole;
  // 3 significant digits, but never finer than 0.01 %.
  const double rounded = std::round(pct * 100.0) / 100.0;
  if (rounded == 0) return "0%";
  return format_number(rounded, 3) + "%";
}

}  // namespace nl
