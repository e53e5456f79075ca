// Counts heap allocations (operator new) while armed, from every thread: the step's "no
// allocation per step" rule covers the engine's and the thread pools' threads too. The
// counting operator new is in alloc_probe.cpp (next to the largest-allocation probe).
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace nltest {

struct AllocCounter {
  static std::atomic<bool> armed;
  static std::atomic<int64_t> count;
  static std::atomic<int64_t> bytes;
  AllocCounter() {
    count = 0;
    bytes = 0;
    armed = true;
  }
  ~AllocCounter() { armed = false; }
  int64_t allocations() const { return count.load(); }
  int64_t allocated_bytes() const { return bytes.load(); }
};

}  // namespace nltest
