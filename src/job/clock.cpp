#include "nightlora/job/clock.h"

#include <chrono>
#include <cmath>
#include <ctime>
#include <thread>

namespace nl {

double SystemClock::now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double SystemClock::seconds_of_day() {
  auto now = std::chrono::system_clock::now();
  std::time_t t = std::chrono::system_clock::to_time_t(now);
  std::tm lt{};
  localtime_r(&t, &lt);
  double frac = std::chrono::duration<double>(now.time_since_epoch()).count();
  frac -= std::floor(frac);
  return lt.tm_hour * 3600.0 + lt.tm_min * 60.0 + lt.tm_sec + frac;
}

void SystemClock::sleep(double seconds) {
  if (seconds > 0) std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
}

double ManualClock::seconds_of_day() { return std::fmod(start_of_day_s_ + now_, 86400.0); }

}  // namespace nl
