// Limits on what a job may spend: wall time, steps and energy. A job stops cleanly (with a
// checkpoint) when one is used up.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace nl {

struct Budgets {
  std::optional<double> wall_s;      // seconds since the job (this invocation) started
  std::optional<int64_t> steps;      // training steps, counted over the whole run (resumes included)
  std::optional<double> energy_j;    // joules measured by the EnergyMeter

  bool any() const { return wall_s || steps || energy_j; }
};

struct BudgetUse {
  double wall_s = 0;
  int64_t steps = 0;
  std::optional<double> energy_j;    // empty: energy not measurable here
};

// Throws nl::Error when a budget cannot be enforced: an energy budget on a machine where the
// energy is unavailable (we will not stop on an invented figure), or a non-positive limit.
void check_budgets_enforceable(const Budgets& b, bool energy_available, const std::string& why_unavailable = "");

// The budget that is used up, in words ("step budget of 500 steps reached"), or empty.
std::optional<std::string> exhausted_budget(const Budgets& b, const BudgetUse& use);

}  // namespace nl
