// The AVX2 matrix-vector kernels (kernels_matvec_avx2_body.h without AVX-VNNI).
#include "kernels_matvec.h"
#include "cpu_features_x86.h"

#if defined(__x86_64__)
// (the body's standard headers before the target attribute: see cached_attention_avx2.cpp)
#include <algorithm>

#if defined(__clang__)  // clang ignores GCC target pragmas: the same features, per function
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif
#define NL_MATVEC_VNNI 0
#include "kernels_matvec_avx2_body.h"
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

namespace nl::engine {

const MatvecKernels* matvec_kernels_avx2() {
  static const bool cpu_has_it = x86_features().avx2;
  static const MatvecKernels k{"avx2", int8_tiles_avx2, f32_tiles_avx2};
  return cpu_has_it ? &k : nullptr;
}

}  // namespace nl::engine

#else

namespace nl::engine {
const MatvecKernels* matvec_kernels_avx2() { return nullptr; }
}  // namespace nl::engine

#endif
