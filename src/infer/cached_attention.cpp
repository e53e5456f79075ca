// The portable build of the attention kernels (cached_attention_body.h) and the choice of
// the set for this CPU.
#include "cached_attention.h"

#define NL_ATTN_F16C 0
#include "cached_attention_body.h"

namespace nl::infer {

const AttentionKernels& attention_kernels_portable() {
  static const AttentionKernels k{"portable", attention_task_impl, to_halves_impl, from_halves_impl};
  return k;
}

const AttentionKernels& attention_kernels() {
  if (const AttentionKernels* k = attention_kernels_avx2()) return *k;
  return attention_kernels_portable();
}

}  // namespace nl::infer
