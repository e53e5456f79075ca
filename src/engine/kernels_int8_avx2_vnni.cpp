// The AVX2 int8 kernel set with AVX-VNNI dot products (kernels_int8_avx2_body.h with
// NL_INT8_VNNI = 1: vpdpbusd, the VEX form of Intel Alder Lake and later, AMD Zen 5).
// Bit-identical to the plain AVX2 set; handed out only when the CPU has AVX-VNNI
// (x86_features()).
#include "kernels_int8.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "cpu_features_x86.h"

#if defined(__clang__)  // clang ignores GCC target pragmas: the same features, per function
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c,avxvnni"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avxvnni")
#endif
#define NL_INT8_VNNI 1
#include "kernels_int8_avx2_body.h"
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

namespace nl::engine {

const Int8Kernels* int8_kernels_avx2_vnni() {
  if (!x86_features().avx_vnni) return nullptr;  // first: the table is built by AVX-VNNI code
  static const Int8Kernels k = avx2_int8_kernels("avx2-vnni");
  return &k;
}

}  // namespace nl::engine

#else

namespace nl::engine {
const Int8Kernels* int8_kernels_avx2_vnni() { return nullptr; }
}  // namespace nl::engine

#endif
