// CPUID and XCR0 decoding for x86_features() (cpu_features_x86.h). The bit positions are
// those of the Intel SDM, vol. 2A, CPUID, and vol. 1, 13.3 (XCR0).
#include "cpu_features_x86.h"

#if defined(__x86_64__)
#include <cpuid.h>

#include <cstdint>
#endif

namespace nl::engine {

#if defined(__x86_64__)
namespace {

// XCR0 through xgetbv (plain asm: no target attribute needed). Only valid when CPUID says
// the OS enabled XSAVE (OSXSAVE).
uint64_t xcr0() {
  uint32_t lo, hi;
  asm volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

bool bit(unsigned reg, int i) { return (reg >> i) & 1u; }

X86Features detect() {
  X86Features f;
  unsigned a, b, c, d;
  if (!__get_cpuid(0, &a, &b, &c, &d)) return f;
  const unsigned max_leaf = a;

  __get_cpuid(1, &a, &b, &c, &d);
  const bool osxsave = bit(c, 27), avx = bit(c, 28), fma = bit(c, 12), f16c = bit(c, 29);
  if (!osxsave || !avx || max_leaf < 7) return f;
  const uint64_t xcr = xcr0();
  const bool ymm_state = (xcr & 0x6) == 0x6;     // SSE and AVX state
  const bool zmm_state = (xcr & 0xE6) == 0xE6;   // and opmask, ZMM_Hi256, Hi16_ZMM
  if (!ymm_state) return f;

  __get_cpuid_count(7, 0, &a, &b, &c, &d);
  const unsigned max_subleaf = a;
  f.avx2 = bit(b, 5) && fma && f16c;
  const bool avx512f = bit(b, 16), avx512bw = bit(b, 30), avx512vl = bit(b, 31), avx512vnni = bit(c, 11);
  f.avx512 = f.avx2 && zmm_state && avx512f && avx512bw && avx512vl;
  f.avx512_vnni = f.avx512 && avx512vnni;
  if (max_subleaf >= 1) {
    __get_cpuid_count(7, 1, &a, &b, &c, &d);
    f.avx_vnni = f.avx2 && bit(a, 4);
  }
  return f;
}

}  // namespace

const X86Features& x86_features() {
  static const X86Features f = detect();
  return f;
}

#else

const X86Features& x86_features() {
  static const X86Features f;
  return f;
}

#endif

}  // namespace nl::engine
