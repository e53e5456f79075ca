// The AVX2 int8 kernel set (kernels_int8_avx2_body.h without VNNI), compiled for
// AVX2+FMA+F16C function by function and handed out only when the CPU has them.
#include "kernels_int8.h"

#if defined(__x86_64__)
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

}  // namespace nl::engine

#else

namespace nl::engine {
const Int8Kernels* int8_kernels_avx2_plain() { return nullptr; }
const Int8Kernels* int8_kernels_avx2() { return nullptr; }
}  // namespace nl::engine

#endif
