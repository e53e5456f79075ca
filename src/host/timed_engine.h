// Measuring the step from the inside: a clock for the host thread's categories and a
// FrozenEngine decorator that times every product the step submits.
//
// The decorator forwards each call to the real engine and hands the ticket to a monitor
// thread, which waits for the products in submission order and stamps each completion. As
// an engine runs its products one after another, a product's busy time is from
// max(its submission, the previous completion) to its completion. This needs nothing from
// the backend but its tickets, so it works for every engine. The monitor sleeps in the
// engine's wait between completions; records go through a fixed ring, so timing allocates
// nothing per product.
#pragma once
#include <array>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

#include "nightlora/engine/frozen_engine.h"
#include "nightlora/host/step_timing.h"

namespace nl {

using StepClockPoint = std::chrono::steady_clock::time_point;

// The host thread's time split into categories: time is charged to the current category
// until the next switch, so the categories partition the measured interval.
class HostClock {
 public:
  enum Cat { Other = 0, Adapter, Attention, Optimizer, Wait, kCats };

  void start() {
    acc_.fill(0);
    cur_ = Other;
    since_ = std::chrono::steady_clock::now();
  }
  // Charges the time since the last switch to the current category; returns the previous one.
  Cat switch_to(Cat c) {
    const StepClockPoint now = std::chrono::steady_clock::now();
    acc_[cur_] += std::chrono::duration<double>(now - since_).count();
    since_ = now;
    const Cat prev = cur_;
    cur_ = c;
    return prev;
  }
  double seconds(Cat c) const { return acc_[c]; }

  // Charges a scope to a category, then returns to the enclosing one.
  class Scope {
   public:
    Scope(HostClock& c, Cat cat) : clock_(c), prev_(c.switch_to(cat)) {}
    ~Scope() { clock_.switch_to(prev_); }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    HostClock& clock_;
    Cat prev_;
  };

 private:
  std::array<double, kCats> acc_{};
  Cat cur_ = Other;
  StepClockPoint since_{};
};

class TimedEngine final : public FrozenEngine {
 public:
  enum Kind { Forward = 0, Recompute, InputGrad, kKinds };

  TimedEngine(FrozenEngine& inner, HostClock& clock);
  ~TimedEngine() override;

  // Forward products submitted from now on count as recompute (true) or forward (false).
  void set_recomputing(bool on) { recomputing_ = on; }
  // Waits until every submitted product is stamped, then returns the busy seconds per kind
  // and the product count since the last reset.
  void collect(StepTiming& t);
  void reset();

  std::string backend() const override { return inner_.backend(); }
  int threads() const override { return inner_.threads(); }
  std::string isa() const override { return inner_.isa(); }
  std::vector<Precision> cheaper_modes(WeightHandle h) const override { return inner_.cheaper_modes(h); }
  WeightHandle handle(int64_t layer, Proj p) const override { return inner_.handle(layer, p); }
  WeightHandle output_handle() const override { return inner_.output_handle(); }
  int64_t rows(WeightHandle h) const override { return inner_.rows(h); }
  int64_t cols(WeightHandle h) const override { return inner_.cols(h); }
  EngineTicket submit_forward(WeightHandle h, const float* X, int64_t T, float* Y,
                              Precision p = Precision::F32) override;
  EngineTicket submit_input_grad(WeightHandle h, const float* dY, int64_t T, float* dX,
                                 Precision p = Precision::F32) override;
  // Charged to the host clock's Wait category.
  void wait(EngineTicket t) override;
  void reserve_forward(WeightHandle h, int64_t max_tokens, Precision p) override {
    inner_.reserve_forward(h, max_tokens, p);
  }
  void reserve_input_grad(WeightHandle h, int64_t max_tokens, Precision p) override {
    inner_.reserve_input_grad(h, max_tokens, p);
  }
  size_t resident_bytes() const override { return inner_.resident_bytes(); }
  size_t resident_weight_bytes() const override { return inner_.resident_weight_bytes(); }
  // The wrapped backend's own device clock (Vulkan timestamps), passed through.
  EngineDeviceTime device_time() const override { return inner_.device_time(); }

 private:
  struct Record {
    EngineTicket ticket;
    Kind kind;
    StepClockPoint submitted;
  };
  static constexpr size_t kRing = 1024;

  void record(EngineTicket t, Kind k, WeightHandle h, int64_t T, Precision p);
  void monitor_main();

  FrozenEngine& inner_;
  HostClock& clock_;
  bool recomputing_ = false;

  std::mutex mu_;
  std::condition_variable cv_;
  std::array<Record, kRing> ring_{};
  uint64_t pushed_ = 0, stamped_ = 0;  // records submitted / completed (under mu_)
  std::array<double, kKinds> busy_{};  // under mu_
  int64_t products_ = 0;               // under mu_
  double ops_int8_ = 0, ops_float_ = 0;  // under mu_: operations submitted, by arithmetic
  StepClockPoint last_done_{};         // monitor thread only
  bool stop_ = false;
  std::thread monitor_;
};

}  // namespace nl
