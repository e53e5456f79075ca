// Background mode's question before every step: may a step run now? If not, why, and how
// long to wait before asking again, or should the job stop?
//
// Checked in this order: budgets (stop), pause requests (wait), the time window (wait until
// it opens), external power (wait), battery level (wait). The job checkpoints when a wait
// begins (see BackgroundGate::wait_until_runnable's on_wait_begins), so the device may be
// unplugged or the job killed while it waits without losing anything; a run that does not
// finish inside one window continues in the next.
#pragma once
#include <functional>
#include <optional>
#include <string>

#include "nightlora/job/budget.h"
#include "nightlora/job/clock.h"
#include "nightlora/job/pause_control.h"
#include "nightlora/job/time_window.h"

namespace nl {

struct BackgroundConditions {
  bool require_external_power = false;     // --on-power
  std::optional<double> min_battery_percent;  // --min-battery
  std::optional<TimeWindow> window;        // --window 23:00-07:00
  Budgets budgets;
  std::string sysfs_root = "/sys";
  // Longest single wait: conditions are re-checked (and stop requests seen) at least this often.
  double recheck_s = 60;
  // How often to look for a resume request while paused.
  double pause_poll_s = 2;
};

enum class GateVerdict { Run, Wait, Stop };

struct GateDecision {
  GateVerdict verdict = GateVerdict::Run;
  std::string reason;   // for Wait and Stop; for Run, the conditions that hold
  double wait_s = 0;    // for Wait: how long before asking again
};

const char* verdict_name(GateVerdict v);

class BackgroundGate {
 public:
  // `pause` may be null (no pause control). The clock and pause control must outlive the gate.
  BackgroundGate(BackgroundConditions cond, Clock& clock, PauseControl* pause);

  GateDecision check(const BudgetUse& use);

  // Asks check() until it says Run or Stop, sleeping on the clock in between.
  // `use` gives the current budget use; `on_wait_begins` runs once when a wait starts (the
  // job checkpoints there) with the first Wait decision; `stop_requested` (e.g. SIGTERM seen)
  // ends the wait with Stop. Returns the final decision.
  GateDecision wait_until_runnable(const std::function<BudgetUse()>& use,
                                   const std::function<void(const GateDecision&)>& on_wait_begins = {},
                                   const std::function<bool()>& stop_requested = {});

  const BackgroundConditions& conditions() const { return cond_; }

 private:
  BackgroundConditions cond_;
  Clock& clock_;
  PauseControl* pause_;
};

}  // namespace nl
