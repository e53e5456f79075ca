// The AVX2 + F16C + FMA build of the attention kernels (cached_attention_body.h).
#include "cached_attention.h"

#if defined(__x86_64__)
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#define NL_ATTN_F16C 1
#include "cached_attention_body.h"
#pragma GCC pop_options

namespace nl::infer {

const AttentionKernels* attention_kernels_avx2() {
  static const bool cpu_has_it =
      __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
  static const AttentionKernels k{"avx2", attention_task_impl, to_halves_impl, from_halves_impl};
  return cpu_has_it ? &k : nullptr;
}

}  // namespace nl::infer

#else

namespace nl::infer {
const AttentionKernels* attention_kernels_avx2() { return nullptr; }
}  // namespace nl::infer

#endif
