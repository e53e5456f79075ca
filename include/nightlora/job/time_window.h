// A daily time window such as "23:00-07:00" (crossing midnight) or "01:30-05:00", in local
// time: background training runs only inside it.
#pragma once
#include <string>

namespace nl {

class TimeWindow {
 public:
  // Parses "HH:MM-HH:MM" (24-hour clock). Throws nl::Error naming `flag` on bad text or an
  // empty window (start == end).
  static TimeWindow parse(const std::string& text, const std::string& flag = "--window");

  // Whether `seconds_of_day` (since local midnight) is inside: start inclusive, end exclusive.
  bool contains(double seconds_of_day) const;
  // Seconds until the window next opens (0 when inside).
  double seconds_until_open(double seconds_of_day) const;
  // Seconds until it closes (0 when outside).
  double seconds_until_close(double seconds_of_day) const;

  int start_minute() const { return start_; }
  int end_minute() const { return end_; }
  std::string text() const;  // "23:00-07:00"

 private:
  int start_ = 0;  // minutes since midnight
  int end_ = 0;
};

// "3h05m", "42m10s", "12s", "0.5s", "0.0012s": for messages about waits and budgets (below
// 10 s with 3 significant digits).
std::string format_duration(double seconds);

}  // namespace nl
