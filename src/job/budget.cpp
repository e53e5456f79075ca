#include "nightlora/job/budget.h"

#include <cstdio>

#include "nightlora/job/time_window.h"
#include "nightlora/util/error.h"

namespace nl {

void check_budgets_enforceable(const Budgets& b, bool energy_available, const std::string& why_unavailable) {
  if (b.wall_s && !(*b.wall_s > 0)) fail("--max-time", "must be positive");
  if (b.steps && *b.steps < 1) fail("--max-steps", "must be at least 1");
  if (b.energy_j && !(*b.energy_j > 0)) fail("--max-energy", "must be positive");
  if (b.energy_j && !energy_available)
    fail("--max-energy", "energy cannot be measured on this machine" + (why_unavailable.empty() ? "" : ": " + why_unavailable),
         "drop the energy budget or use a wall-time budget instead");
}

std::optional<std::string> exhausted_budget(const Budgets& b, const BudgetUse& use) {
  char buf[160];
  if (b.steps && use.steps >= *b.steps) {
    std::snprintf(buf, sizeof(buf), "step budget of %lld steps reached", static_cast<long long>(*b.steps));
    return buf;
  }
  if (b.wall_s && use.wall_s >= *b.wall_s) return "wall-time budget of " + format_duration(*b.wall_s) + " reached";
  if (b.energy_j && use.energy_j && *use.energy_j >= *b.energy_j) {
    std::snprintf(buf, sizeof(buf), "energy budget of %.0f J (%.2f Wh) reached", *b.energy_j, *b.energy_j / 3600);
    return buf;
  }
  return std::nullopt;
}

}  // namespace nl
