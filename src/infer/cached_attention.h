// Causal grouped-query attention of new query rows over a KV cache (or a tree of new rows
// over it: CachedAttention::parent), and the cache's f16
// row conversions. The cache holds, per layer, keys (after RoPE) and values of every cached
// position: positions x kv_dim elements, f16 or f32 (KvType). One task is a block of up to
// kMaxQueryBlock query tokens and one KV head: the block's queries and its group's query
// heads share each key and value row, which is read (and, for f16, converted) once per
// task. Each query's arithmetic is the same whatever the block (scores in key order, one
// softmax, values added in key order), so results do not depend on how queries are grouped:
// a prompt at once, in chunks or token by token gives the same bits.
#pragma once
#include <cstdint>

#include "nightlora/infer/decoder.h"

namespace nl::infer {

inline constexpr int64_t kMaxQueryBlock = 8;

struct CachedAttention {
  const float* q;      // T x (n_head * hd), after RoPE
  int64_t T;           // new query rows, at positions n_past .. n_past + T - 1
  int64_t n_past;      // cached positions before them (the cache holds n_past + T)
  int64_t n_head, n_kv, hd;
  float scale;         // 1 / sqrt(hd)
  KvType type;
  const void* k;       // the layer's keys: (n_past + T) x (n_kv * hd), f16 bits or floats
  const void* v;       // its values, the same
  float* out;          // T x (n_head * hd)
  // nullptr: the new rows are consecutive positions, row t sees the cache and rows 0..t.
  // Otherwise the new rows are a tree (Decoder::forward_tree): parent[t] is row t's parent
  // row (< t), or -1 for a child of the cached positions; row t sees the n_past cached
  // positions, its ancestors' rows and itself, whose keys are in the cache's slots n_past + row.
  // Its arithmetic is that of the same row run alone after the cache plus its ancestors (the
  // visible keys in the same order, so the same bits as a chain of causal forwards).
  const int32_t* parent = nullptr;
};

// Heads of at most this many values, a multiple of 8 (stories260K's 8, tinystories-656k's
// 16), take a path made for them (cached_attention_body.h): the same arithmetic, laid out
// across keys.
inline constexpr int64_t kSmallHead = 16;
inline bool small_head(int64_t hd) { return hd % 8 == 0 && hd <= kSmallHead; }

// Floats of scratch one task needs: scores of its queries' heads over the keys, then 8
// converted key or value rows; for a small head, a transposed tile of 8 keys and every value
// row of the task (converted from an f16 cache) instead.
inline int64_t cached_attention_scratch(int64_t n_head, int64_t n_kv, int64_t n_keys, int64_t hd) {
  return kMaxQueryBlock * (n_head / n_kv) * n_keys + (small_head(hd) ? 8 * kSmallHead + n_keys * hd : 8 * hd);
}

// The kernels for this CPU: AVX2 + F16C + FMA on x86-64 where present, else portable code
// on GCC's vectors (NEON's conversions on arm64). Results are deterministic per machine.
struct AttentionKernels {
  const char* isa;
  // Query tokens [t0, t1) (at most kMaxQueryBlock), KV head kvh of `a` into a.out;
  // scratch: cached_attention_scratch floats.
  void (*task)(const CachedAttention& a, int64_t t0, int64_t t1, int64_t kvh, float* scratch);
  // n floats to f16 bits (round to nearest even, as nl::f32_to_fp16) and back.
  void (*to_halves)(const float* x, int64_t n, uint16_t* h);
  void (*from_halves)(const uint16_t* h, int64_t n, float* x);
};
const AttentionKernels& attention_kernels();
const AttentionKernels& attention_kernels_portable();
// nullptr without AVX2 + F16C + FMA (build or CPU).
const AttentionKernels* attention_kernels_avx2();

}  // namespace nl::infer
