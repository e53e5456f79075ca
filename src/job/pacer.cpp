#include "nightlora/job/pacer.h"

#include <chrono>
#include <cstdio>
#include <thread>

namespace nl {

void sleep_seconds(double seconds) {
  if (seconds > 0) std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
}

Pacer::Pacer(PacingConfig cfg, TemperatureSource* source, Sleep sleep, Interrupt interrupt)
    : ctl_(std::move(cfg)), source_(source), sleep_(std::move(sleep)), interrupt_(std::move(interrupt)) {}

std::optional<double> Pacer::read() {
  if (!source_) return std::nullopt;
  return source_->read().celsius;
}

void Pacer::before_step() { temp_start_ = read(); }

PacingDecision Pacer::after_step(double step_s, double work_units) {
  PacingDecision d;
  d.step_s = step_s;
  d.temp_start_c = temp_start_;
  d.temp_end_c = read();
  d.idle_s = ctl_.step_done(step_s, work_units, d.temp_start_c, d.temp_end_c, &d.reason);
  d.step = ctl_.steps();
  d.slowdown = ctl_.detector().slowdown();
  d.throttling_suspected = ctl_.detector().throttled();
  d.expected_rise_c = ctl_.expected_rise_c();
  if (d.idle_s > 0) sleep_(d.idle_s);

  std::optional<double> t = d.temp_end_c;
  const auto& cfg = ctl_.config();
  if (cfg.ceiling_c && t) {
    if (d.idle_s > 0) t = read();
    double waited = 0;
    double first = t ? *t : 0;
    bool interrupted = false;
    while (t && ctl_.must_cool(*t) && waited < cfg.max_wait_s) {
      if (interrupt_ && interrupt_()) {
        interrupted = true;
        break;
      }
      sleep_(cfg.poll_s);
      waited += cfg.poll_s;
      t = read();
    }
    if (waited > 0 || interrupted) {
      const char* how = !t ? " (sensor stopped answering)"
                        : !ctl_.must_cool(*t) ? ""
                        : interrupted ? " (interrupted)"
                                      : " (gave up: the device does not get cool enough; running anyway)";
      char buf[240];
      std::snprintf(buf, sizeof(buf), "cooling: %.1f C + expected rise %.2f C would reach the ceiling %.1f C; idled %.1f s%s",
                    first, d.expected_rise_c, *cfg.ceiling_c, waited, how);
      d.reason = d.reason.empty() ? buf : d.reason + "; " + buf;
      d.idle_s += waited;
    }
  }
  if (d.reason.empty()) d.reason = cfg.ceiling_c ? (d.temp_end_c ? "under the ceiling" : "no temperature reading") : "no pacing";
  d.temp_next_c = t;
  temp_start_ = t;  // the next step starts from here unless before_step reads again
  total_idle_s_ += d.idle_s;
  return d;
}

}  // namespace nl
