// The AVX2 + F16C + FMA build of the attention kernels (cached_attention_body.h).
#include "cached_attention.h"
#include "../engine/cpu_features_x86.h"

#if defined(__x86_64__)
// The body's standard headers come before the target attribute: clang would otherwise apply
// it to redeclarations of library functions already defined (-Wignored-attributes).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#if defined(__clang__)  // clang ignores GCC target pragmas: the same features, per function
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif
#define NL_ATTN_F16C 1
#include "cached_attention_body.h"
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

namespace nl::infer {

const AttentionKernels* attention_kernels_avx2() {
  static const bool cpu_has_it = nl::engine::x86_features().avx2;
  static const AttentionKernels k{"avx2", attention_task_impl, to_halves_impl, from_halves_impl};
  return cpu_has_it ? &k : nullptr;
}

}  // namespace nl::infer

#else

namespace nl::infer {
const AttentionKernels* attention_kernels_avx2() { return nullptr; }
}  // namespace nl::infer

#endif
