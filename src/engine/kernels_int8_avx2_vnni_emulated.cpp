// The AVX-VNNI int8 kernel set with vpdpbusd done by AVX2 instructions
// (kernels_int8_avx2_body.h with NL_INT8_VNNI = NL_INT8_VNNI_EMULATED = 1), for tests: the
// VNNI set's own code (unsigned activations against signed weights, the weight sums it
// subtracts, flipped broadcasts) runs on any AVX2 CPU and under qemu, whose TCG has no
// AVX-VNNI. Slower than both real sets; never chosen by the engine.
#include "kernels_int8.h"
#include "cpu_features_x86.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#if defined(__clang__)  // clang ignores GCC target pragmas: the same features, per function
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif
#define NL_INT8_VNNI 1
#define NL_INT8_VNNI_EMULATED 1
#include "kernels_int8_avx2_body.h"
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

namespace nl::engine {

const Int8Kernels* int8_kernels_avx2_vnni_emulated() {
  if (!x86_features().avx2) return nullptr;  // first: the table is built by AVX2 code
  static const Int8Kernels k = avx2_int8_kernels("avx2-vnni-emulated");
  return &k;
}

}  // namespace nl::engine

#else

namespace nl::engine {
const Int8Kernels* int8_kernels_avx2_vnni_emulated() { return nullptr; }
}  // namespace nl::engine

#endif
