// The AVX2 int8 kernel set with AVX-512 VNNI dot products (kernels_int8_avx2_body.h with
// NL_INT8_VNNI = NL_INT8_VNNI_EVEX = 1: the EVEX vpdpbusd of Ice Lake and later Xeons, Zen 4
// and Zen 5, which CPUs without AVX-VNNI's VEX form still have). Bit-identical to the other
// AVX2 sets; handed out only where the CPU and the OS support AVX512F/BW/VL/VNNI
// (x86_features()).
#include "kernels_int8.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "cpu_features_x86.h"

#if defined(__clang__)  // clang ignores GCC target pragmas: the same features, per function
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")
#endif
#define NL_INT8_VNNI 1
#define NL_INT8_VNNI_EVEX 1
#include "kernels_int8_avx2_body.h"
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

namespace nl::engine {

const Int8Kernels* int8_kernels_avx512_vnni() {
  static const Int8Kernels k = avx2_int8_kernels("avx512-vnni");
  return x86_features().avx512_vnni ? &k : nullptr;
}

}  // namespace nl::engine

#else

namespace nl::engine {
const Int8Kernels* int8_kernels_avx512_vnni() { return nullptr; }
}  // namespace nl::engine

#endif
