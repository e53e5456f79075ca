// The step's timing: the engine decorator's monitor thread and the peak-RSS reading.
#include <sys/resource.h>

#include "nightlora/host/step_timing.h"
#include "timed_engine.h"

namespace nl {

size_t peak_rss_bytes() {
  rusage ru{};
  if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
  return static_cast<size_t>(ru.ru_maxrss) * 1024;  // Linux reports kilobytes
}

double process_cpu_seconds() {
  rusage ru{};
  if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
  const auto sec = [](const timeval& tv) { return static_cast<double>(tv.tv_sec) + 1e-6 * static_cast<double>(tv.tv_usec); };
  return sec(ru.ru_utime) + sec(ru.ru_stime);
}

TimedEngine::TimedEngine(FrozenEngine& inner, HostClock& clock)
    : inner_(inner), clock_(clock), monitor_([this] { monitor_main(); }) {}

TimedEngine::~TimedEngine() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  monitor_.join();
}

void TimedEngine::record(EngineTicket t, Kind k, WeightHandle h, int64_t T, Precision p) {
  const StepClockPoint now = std::chrono::steady_clock::now();
  // One multiply-add per weight and token, counted as two operations.
  const double ops = 2.0 * static_cast<double>(T) * static_cast<double>(inner_.rows(h)) * static_cast<double>(inner_.cols(h));
  {
    std::unique_lock<std::mutex> lk(mu_);
    (p == Precision::Int8 ? ops_int8_ : ops_float_) += ops;
    // The ring is far larger than the products a step keeps in flight; if it ever fills,
    // wait for the monitor rather than overwrite.
    cv_.wait(lk, [&] { return pushed_ - stamped_ < kRing; });
    ring_[pushed_ % kRing] = Record{t, k, now};
    ++pushed_;
  }
  cv_.notify_all();
}

EngineTicket TimedEngine::submit_forward(WeightHandle h, const float* X, int64_t T, float* Y, Precision p) {
  const EngineTicket t = inner_.submit_forward(h, X, T, Y, p);
  record(t, recomputing_ ? Recompute : Forward, h, T, p);
  return t;
}

EngineTicket TimedEngine::submit_input_grad(WeightHandle h, const float* dY, int64_t T, float* dX, Precision p) {
  const EngineTicket t = inner_.submit_input_grad(h, dY, T, dX, p);
  record(t, InputGrad, h, T, p);
  return t;
}

void TimedEngine::wait(EngineTicket t) {
  HostClock::Scope waiting(clock_, HostClock::Wait);
  inner_.wait(t);
}

void TimedEngine::monitor_main() {
  for (;;) {
    Record r;
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] { return stop_ || pushed_ > stamped_; });
      if (pushed_ == stamped_) return;  // stopping, nothing in flight
      r = ring_[stamped_ % kRing];
    }
    inner_.wait(r.ticket);
    const StepClockPoint done = std::chrono::steady_clock::now();
    const StepClockPoint start = std::max(r.submitted, last_done_);
    last_done_ = done;
    {
      std::lock_guard<std::mutex> lk(mu_);
      busy_[r.kind] += std::chrono::duration<double>(done - start).count();
      ++products_;
      ++stamped_;
    }
    cv_.notify_all();
  }
}

void TimedEngine::collect(StepTiming& t) {
  std::unique_lock<std::mutex> lk(mu_);
  cv_.wait(lk, [&] { return stamped_ == pushed_; });
  t.frozen_forward_s = busy_[Forward];
  t.frozen_recompute_s = busy_[Recompute];
  t.frozen_input_grad_s = busy_[InputGrad];
  t.products = products_;
  t.frozen_ops_int8 = ops_int8_;
  t.frozen_ops_float = ops_float_;
}

void TimedEngine::reset() {
  std::unique_lock<std::mutex> lk(mu_);
  cv_.wait(lk, [&] { return stamped_ == pushed_; });
  busy_.fill(0);
  products_ = 0;
  ops_int8_ = ops_float_ = 0;
}

}  // namespace nl
