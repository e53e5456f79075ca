// The AVX2 int8 kernel set (kernels_int8_avx2_body.h without VNNI), compiled for
// AVX2+FMA+F16C function by function and handed out only when the CPU has them.
#include "kernels_int8.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "cpu_features_x86.h"
#include "nightlora/util/error.h"

#if defined(__clang__)  // clang ignores GCC target pragmas: the same features, per function
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif
#define NL_INT8_VNNI 0
#include "kernels_int8_avx2_body.h"
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

namespace nl::engine {

const Int8Kernels* int8_kernels_avx2_plain() {
  if (!x86_features().avx2) return nullptr;  // first: the table is built by AVX2 code
  static const Int8Kernels k = avx2_int8_kernels("avx2");
  return &k;
}

const Int8Kernels* int8_kernels_avx2_choice(const char* nl_int8_vnni) {
  if (!int8_kernels_avx2_plain()) return nullptr;
  const std::string v = nl_int8_vnni ? nl_int8_vnni : "";
  const auto need = [&](const Int8Kernels* k, const char* what) {
    // A set the CPU lacks is an error, not a silent fallback: a benchmark or a test that
    // forces one must not measure another.
    if (!k)
      fail("NL_INT8_VNNI=" + v, std::string("this CPU (or its OS) has no ") + what,
           "unset NL_INT8_VNNI or set it to auto, 0 (plain AVX2) or a VNNI form the CPU has");
    return k;
  };
  if (v == "0" || v == "avx2") return int8_kernels_avx2_plain();
  if (v == "avx-vnni" || v == "avx2-vnni") return need(int8_kernels_avx2_vnni(), "AVX-VNNI");
  if (v == "avx512-vnni") return need(int8_kernels_avx512_vnni(), "AVX-512 VNNI (with AVX512F/BW/VL)");
  if (!v.empty() && v != "auto" && v != "1")
    fail("NL_INT8_VNNI=" + v, "unknown int8 kernel set",
         "use auto (the default), 0 or avx2 (no VNNI), avx-vnni (VEX vpdpbusd) or avx512-vnni (EVEX vpdpbusd)");
  // With both VNNI forms (Zen 5, Sapphire Rapids and later) the AVX-512 one: on Zen 5 its
  // 512-bit loops took 0.6-0.8x the AVX-VNNI set's time (median over 8 shapes per type,
  // int8 products at 256 tokens, 2 threads, docs/performance/int8-types-2026-12-06-zen5.md).
  if (const Int8Kernels* k = int8_kernels_avx512_vnni()) return k;
  if (const Int8Kernels* k = int8_kernels_avx2_vnni()) return k;
  return int8_kernels_avx2_plain();
}

const Int8Kernels* int8_kernels_avx2() {
  static const Int8Kernels* chosen = int8_kernels_avx2_choice(std::getenv("NL_INT8_VNNI"));
  return chosen;
}

}  // namespace nl::engine

#else

namespace nl::engine {
const Int8Kernels* int8_kernels_avx2_plain() { return nullptr; }
const Int8Kernels* int8_kernels_avx2_choice(const char*) { return nullptr; }
const Int8Kernels* int8_kernels_avx2() { return nullptr; }
}  // namespace nl::engine

#endif
