#include "alloc_probe.h"

#include <cstdlib>
#include <new>

namespace nltest {
std::atomic<bool> AllocProbe::armed{false};
std::atomic<size_t> AllocProbe::largest{0};
}  // namespace nltest

void* operator new(std::size_t n) {
  if (nltest::AllocProbe::armed.load(std::memory_order_relaxed)) {
    size_t cur = nltest::AllocProbe::largest.load(std::memory_order_relaxed);
    while (n > cur && !nltest::AllocProbe::largest.compare_exchange_weak(cur, n)) {
    }
  }
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
