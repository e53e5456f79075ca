// The AVX2 int8 kernel set (kernels_int8_avx2_body.h without VNNI), compiled for
// AVX2+FMA+F16C function by function and handed out only when the CPU has them.
#include "kernels_int8.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#define NL_INT8_VNNI 0
#include "kernels_int8_avx2_body.h"
#pragma GCC pop_options

namespace nl::engine {

const Int8Kernels* int8_kernels_avx2_plain() {
  static const bool cpu_has_it =
      __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
  static const Int8Kernels k = avx2_int8_kernels("avx2");
  return cpu_has_it ? &k : nullptr;
}

const Int8Kernels* int8_kernels_avx2() {
  if (const Int8Kernels* vnni = int8_kernels_avx2_vnni()) return vnni;
  return int8_kernels_avx2_plain();
}

namespace {
// An AMD CPU of family 0x19 or later (Zen 3 and after): CPUID leaf 0's vendor, leaf 1's
// family (base + extended).
bool amd_zen3_or_later() {
  unsigned a, b, c, d;
  if (!__get_cpuid(0, &a, &b, &c, &d)) return false;
  char vendor[13] = {};
  std::memcpy(vendor, &b, 4), std::memcpy(vendor + 4, &d, 4), std::memcpy(vendor + 8, &c, 4);
  if (std::strcmp(vendor, "AuthenticAMD") != 0 || !__get_cpuid(1, &a, &b, &c, &d)) return false;
  const unsigned base = (a >> 8) & 0xF, family = base == 0xF ? base + ((a >> 20) & 0xFF) : base;
  return family >= 0x19;
}
}  // namespace

bool int8_beats_f32_when_requantizing(const Int8Kernels& k) {
  if (&k == int8_kernels_avx2_vnni()) return true;
  static const bool zen3 = amd_zen3_or_later();
  return &k == int8_kernels_avx2_plain() && zen3;
}

}  // namespace nl::engine

#else

namespace nl::engine {
const Int8Kernels* int8_kernels_avx2_plain() { return nullptr; }
const Int8Kernels* int8_kernels_avx2() { return nullptr; }
bool int8_beats_f32_when_requantizing(const Int8Kernels&) { return false; }
}  // namespace nl::engine

#endif
