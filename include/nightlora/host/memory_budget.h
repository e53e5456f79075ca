// The memory budget a training run plans for when the user gives none (--max-memory): a
// share of the memory the machine has available now, so that a run keeps as many blocks'
// activations as fit (each kept block saves its recompute products in backward) without
// crowding out the rest of the device.
//
// The rule (documented in README "Memory"):
//   - half of MemAvailable (/proc/meminfo), a quarter in background mode (the device is the
//     user's: a nightly job must not push apps out of memory);
//   - no budget beyond the minimum (every block but the last recomputed) when the system
//     reports memory pressure: MemAvailable under 10% of MemTotal, or the kernel's pressure
//     stall information (/proc/pressure/memory, "some avg10") above 5%;
//   - the minimum too when /proc/meminfo cannot be read (not Linux, a sandbox).
#pragma once
#include <cstddef>
#include <string>

namespace nl {

struct MemoryState {
  size_t total = 0;      // MemTotal; 0 when unknown
  size_t available = 0;  // MemAvailable
  double pressure_some_avg10 = -1;  // % of the last 10 s some task stalled on memory; < 0: unknown
};

// Reads `proc_root`/meminfo and `proc_root`/pressure/memory; missing or unreadable files leave
// the fields unknown (never an error: a budget is a choice, not a requirement).
MemoryState read_memory_state(const std::string& proc_root = "/proc");

struct MemoryBudget {
  size_t bytes = 0;  // 0: no budget beyond the minimum plan
  std::string rule;  // how it was chosen, for the printed plan: "half of the 20.1 GiB available"
};

MemoryBudget default_memory_budget(const MemoryState& state, bool background);

}  // namespace nl
