// Counts the largest single heap allocation while armed. The test program replaces the
// global operator new (alloc_probe.cpp) so tests can prove that no buffer the size of a
// dequantized matrix, or of [tokens x vocab] logits, is ever allocated.
#pragma once
#include <atomic>
#include <cstddef>

namespace nltest {

struct AllocProbe {
  static std::atomic<bool> armed;
  static std::atomic<size_t> largest;
  AllocProbe() {
    largest = 0;
    armed = true;
  }
  ~AllocProbe() { armed = false; }
  size_t peak() const { return largest.load(); }
};

}  // namespace nltest
