// Time as the background job sees it: elapsed seconds (for budgets and waits), the local time
// of day (for windows like 23:00-07:00) and a way to wait. The system clock for real jobs; a
// manual clock for tests and simulations, which moves only when told (sleeping advances it).
#pragma once

namespace nl {

class Clock {
 public:
  virtual ~Clock() = default;
  // Seconds since an arbitrary start, never going backwards.
  virtual double now_s() = 0;
  // Local wall-clock time of day in seconds since midnight, [0, 86400).
  virtual double seconds_of_day() = 0;
  virtual void sleep(double seconds) = 0;
};

class SystemClock : public Clock {
 public:
  double now_s() override;
  double seconds_of_day() override;  // from the local time zone (TZ, /etc/localtime)
  void sleep(double seconds) override;
};

class ManualClock : public Clock {
 public:
  // Starts at `start_of_day_s` seconds after local midnight.
  explicit ManualClock(double start_of_day_s = 0) : start_of_day_s_(start_of_day_s) {}
  double now_s() override { return now_; }
  double seconds_of_day() override;
  void sleep(double seconds) override { advance(seconds); }
  void advance(double seconds) {
    if (seconds > 0) now_ += seconds;
  }

 private:
  double start_of_day_s_;
  double now_ = 0;
};

}  // namespace nl
