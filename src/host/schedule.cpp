#include "nightlora/host/schedule.h"

#include <algorithm>
#include <cmath>

#include "nightlora/util/error.h"

namespace nl {

ScheduleKind parse_schedule(const std::string& s) {
  if (s == "constant") return ScheduleKind::Constant;
  if (s == "linear") return ScheduleKind::Linear;
  if (s == "cosine") return ScheduleKind::Cosine;
  fail("--schedule", "unknown schedule '" + s + "'", "use cosine, linear or constant");
}

const char* schedule_name(ScheduleKind k) {
  switch (k) {
    case ScheduleKind::Constant: return "constant";
    case ScheduleKind::Linear: return "linear";
    case ScheduleKind::Cosine: return "cosine";
  }
  return "?";
}

double LrSchedule::at(int64_t step) const {
  if (step < warmup) return peak * static_cast<double>(step + 1) / static_cast<double>(warmup);
  if (kind == ScheduleKind::Constant) return peak;
  double span = static_cast<double>(std::max<int64_t>(1, total - warmup));
  double p = std::clamp(static_cast<double>(step - warmup) / span, 0.0, 1.0);
  double f = kind == ScheduleKind::Linear ? 1.0 - p : 0.5 * (1.0 + std::cos(M_PI * p));
  return min + (peak - min) * f;
}

}  // namespace nl
