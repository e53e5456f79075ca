#include "nightlora/job/background_gate.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "nightlora/job/power_supply.h"
#include "nightlora/util/error.h"

namespace nl {

const char* verdict_name(GateVerdict v) {
  switch (v) {
    case GateVerdict::Run: return "run";
    case GateVerdict::Wait: return "wait";
    case GateVerdict::Stop: return "stop";
  }
  return "?";
}

BackgroundGate::BackgroundGate(BackgroundConditions cond, Clock& clock, PauseControl* pause)
    : cond_(std::move(cond)), clock_(clock), pause_(pause) {
  if (!(cond_.recheck_s > 0) || !(cond_.pause_poll_s > 0)) fail("background", "re-check intervals must be positive");
  if (cond_.min_battery_percent && !(*cond_.min_battery_percent >= 0 && *cond_.min_battery_percent <= 100))
    fail("--min-battery", "must be a percentage between 0 and 100");
}

GateDecision BackgroundGate::check(const BudgetUse& use) {
  GateDecision d;
  auto wait = [&](std::string why, double s) {
    d.verdict = GateVerdict::Wait;
    d.reason = std::move(why);
    d.wait_s = std::min(s, cond_.recheck_s);
    return d;
  };
  if (auto b = exhausted_budget(cond_.budgets, use)) {
    d.verdict = GateVerdict::Stop;
    d.reason = *b;
    return d;
  }
  if (pause_ && pause_->paused()) return wait("paused by " + pause_->why(), cond_.pause_poll_s);

  std::string holds;
  if (cond_.window) {
    double sod = clock_.seconds_of_day();
    if (!cond_.window->contains(sod)) {
      double until = cond_.window->seconds_until_open(sod);
      // Sleep to just past the opening, not a fraction of a second before it.
      return wait("outside the time window " + cond_.window->text() + ": opens in " + format_duration(until),
                  std::max(1.0, std::ceil(until)));
    }
    holds = "inside " + cond_.window->text();
  }
  if (cond_.require_external_power || cond_.min_battery_percent) {
    PowerSupplyStatus ps = read_power_supply(cond_.sysfs_root);
    if (cond_.require_external_power) {
      if (!ps.external_power) return wait("waiting for external power: " + ps.detail, cond_.recheck_s);
      if (!*ps.external_power) return wait("on battery (" + ps.detail + "): waiting for external power", cond_.recheck_s);
      holds += std::string(holds.empty() ? "" : ", ") + "on external power (" + ps.detail + ")";
    }
    if (cond_.min_battery_percent) {
      char buf[160];
      if (ps.battery_percent && *ps.battery_percent < *cond_.min_battery_percent) {
        std::snprintf(buf, sizeof(buf), "battery at %.0f%%, below the required %.0f%%: waiting", *ps.battery_percent,
                      *cond_.min_battery_percent);
        return wait(buf, cond_.recheck_s);
      }
      if (ps.battery_percent) std::snprintf(buf, sizeof(buf), "battery at %.0f%%", *ps.battery_percent);
      else std::snprintf(buf, sizeof(buf), "%s", ps.has_battery ? "battery level unreadable: not limiting" : "no battery");
      holds += std::string(holds.empty() ? "" : ", ") + buf;
    }
  }
  d.reason = holds.empty() ? "no conditions" : holds;
  return d;
}

GateDecision BackgroundGate::wait_until_runnable(const std::function<BudgetUse()>& use,
                                                 const std::function<void(const GateDecision&)>& on_wait_begins,
                                                 const std::function<bool()>& stop_requested) {
  bool waiting = false;
  for (;;) {
    if (stop_requested && stop_requested()) return {GateVerdict::Stop, "stop requested", 0};
    GateDecision d = check(use ? use() : BudgetUse{});
    if (d.verdict != GateVerdict::Wait) return d;
    if (!waiting && on_wait_begins) on_wait_begins(d);
    waiting = true;
    clock_.sleep(d.wait_s);
  }
}

}  // namespace nl
