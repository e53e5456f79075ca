// Learning-rate schedules: linear warmup, then constant, linear decay or cosine decay.
//
// For optimizer step s = 0, 1, ..., total-1 (the s-th update):
//   s <  warmup: lr = peak * (s + 1) / warmup          (the first update already moves)
//   s >= warmup: p = (s - warmup) / (total - warmup)    (in [0, 1))
//     constant:  lr = peak
//     linear:    lr = min + (peak - min) * (1 - p)
//     cosine:    lr = min + (peak - min) * 0.5 * (1 + cos(pi * p))
#pragma once
#include <cstdint>
#include <string>

namespace nl {

enum class ScheduleKind { Constant, Linear, Cosine };
ScheduleKind parse_schedule(const std::string& s);  // "constant" | "linear" | "cosine"
const char* schedule_name(ScheduleKind k);

struct LrSchedule {
  ScheduleKind kind = ScheduleKind::Cosine;
  double peak = 1e-4;
  double min = 0.0;
  int64_t warmup = 0;
  int64_t total = 1;
  double at(int64_t step) const;
};

}  // namespace nl
