// The host test program's operator new: the largest-allocation probe shared with the engine
// tests (../engine/alloc_probe.h) plus an allocation counter (alloc_counter.h).
#include <cstdlib>
#include <new>

#include "../engine/alloc_probe.h"
#include "alloc_counter.h"

namespace nltest {
std::atomic<bool> AllocProbe::armed{false};
std::atomic<size_t> AllocProbe::largest{0};
std::atomic<bool> AllocCounter::armed{false};
std::atomic<int64_t> AllocCounter::count{0};
std::atomic<int64_t> AllocCounter::bytes{0};
}  // namespace nltest

void* operator new(std::size_t n) {
  if (nltest::AllocProbe::armed.load(std::memory_order_relaxed)) {
    size_t cur = nltest::AllocProbe::largest.load(std::memory_order_relaxed);
    while (n > cur && !nltest::AllocProbe::largest.compare_exchange_weak(cur, n)) {
    }
  }
  if (nltest::AllocCounter::armed.load(std::memory_order_relaxed)) {
    nltest::AllocCounter::count.fetch_add(1, std::memory_order_relaxed);
    nltest::AllocCounter::bytes.fetch_add(static_cast<int64_t>(n), std::memory_order_relaxed);
  }
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
