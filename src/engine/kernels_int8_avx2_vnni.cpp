// The AVX2 int8 kernel set with AVX-VNNI dot products (kernels_int8_avx2_body.h with
// NL_INT8_VNNI = 1: vpdpbusd, the VEX form of Intel Alder Lake and later, AMD Zen 5).
// Bit-identical to the plain AVX2 set; handed out only when the CPU has AVX-VNNI, and
// NL_INT8_VNNI=0 in the environment turns it off (to compare the two).
#include "kernels_int8.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avxvnni")
#define NL_INT8_VNNI 1
#include "kernels_int8_avx2_body.h"
#pragma GCC pop_options

namespace nl::engine {

const Int8Kernels* int8_kernels_avx2_vnni() {
  static const bool cpu_has_it = [] {
    const char* off = std::getenv("NL_INT8_VNNI");
    if (off && std::string(off) == "0") return false;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c") &&
           __builtin_cpu_supports("avxvnni");
  }();
  static const Int8Kernels k = avx2_int8_kernels("avx2-vnni");
  return cpu_has_it ? &k : nullptr;
}

}  // namespace nl::engine

#else

namespace nl::engine {
const Int8Kernels* int8_kernels_avx2_vnni() { return nullptr; }
}  // namespace nl::engine

#endif
