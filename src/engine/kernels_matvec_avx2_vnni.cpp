// The AVX-VNNI matrix-vector kernels (kernels_matvec_avx2_body.h with vpdpbusd): handed out
// only when the CPU has AVX-VNNI, and not with NL_INT8_VNNI=0 or =avx2 (as the int8 panel
// kernels).
#include "kernels_matvec.h"
#include "cpu_features_x86.h"

#if defined(__x86_64__)
#include <cstdlib>
#include <string>

// (the body's standard headers before the target attribute: see cached_attention_avx2.cpp)
#include <algorithm>

#if defined(__clang__)  // clang ignores GCC target pragmas: the same features, per function
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c,avxvnni"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avxvnni")
#endif
#define NL_MATVEC_VNNI 1
#include "kernels_matvec_avx2_body.h"
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

namespace nl::engine {

const MatvecKernels* matvec_kernels_avx2_vnni() {
  static const bool cpu_has_it = [] {
    const char* off = std::getenv("NL_INT8_VNNI");
    if (off && (std::string(off) == "0" || std::string(off) == "avx2")) return false;  // plain AVX2 asked for
    return x86_features().avx_vnni;
  }();
  static const MatvecKernels k{"avx2-vnni", int8_tiles_avx2, f32_tiles_avx2};
  return cpu_has_it ? &k : nullptr;
}

}  // namespace nl::engine

#else

namespace nl::engine {
const MatvecKernels* matvec_kernels_avx2_vnni() { return nullptr; }
}  // namespace nl::engine

#endif
