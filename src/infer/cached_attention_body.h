// The attention kernels of cached_attention.h, compiled once portably (cached_attention.cpp)
// and once under an AVX2 + F16C + FMA target pragma (cached_attention_avx2.cpp). The
// including file defines NL_ATTN_F16C (1: F16C conversions) before including this; every
// function has internal linkage, so each compilation is its own set.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "cached_attention.h"
#include "host/vec4.h"
#include "nightlora/util/half.h"

#if NL_ATTN_F16C
#include <immintrin.h>
#elif defined(__aarch64__)
#include <arm_neon.h>
#endif

namespace nl::infer {
namespace {

// flatten: everything a kernel calls (vec4.h's inline functions included) is inlined into
// it, so each compilation uses its own instructions, never another one's out-of-line copy.
#define NL_ATTN_KERNEL __attribute__((flatten))

using vec4::f8;
using vec4::load8;
using vec4::store8;

NL_ATTN_KERNEL void to_halves_impl(const float* x, int64_t n, uint16_t* h) {
  int64_t i = 0;
#if NL_ATTN_F16C
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(h + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
#elif defined(__aarch64__)
  for (; i + 4 <= n; i += 4) vst1_u16(h + i, vreinterpret_u16_f16(vcvt_f16_f32(vld1q_f32(x + i))));
#endif
  for (; i < n; ++i) h[i] = f32_to_fp16(x[i]);
}

NL_ATTN_KERNEL void from_halves_impl(const uint16_t* h, int64_t n, float* x) {
  int64_t i = 0;
#if NL_ATTN_F16C
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(x + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i))));
#elif defined(__aarch64__)
  for (; i + 4 <= n; i += 4) vst1q_f32(x + i, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(h + i))));
#endif
  for (; i < n; ++i) x[i] = fp16_to_f32(h[i]);
}

// A query head's dot product with one key: one chain of 8-lane products over the first
// n8 * 8 values, the lanes summed pairwise, ((0+1)+(2+3))+((4+5)+(6+7)), then the values
// past n8 * 8 one by one. dot_keys8 gives every key of a tile of 8 the same arithmetic, so
// a score does not depend on which form computed it (chunked or whole prompts agree).
inline f8 dot_chain(const float* q, const float* k, int64_t n8) {
  f8 acc = {};
  for (int64_t v = 0; v < n8; ++v) acc += load8(q + 8 * v) * load8(k + 8 * v);
  return acc;
}
inline float dot_tail(const float* q, const float* k, int64_t from, int64_t n, float s) {
  for (int64_t e = from; e < n; ++e) s += q[e] * k[e];
  return s;
}
inline float dot_key(const float* q, const float* k, int64_t n) {
  const f8 v = dot_chain(q, k, n / 8);  // (lanes summed in place: an f8 passed by value changes the ABI without AVX)
  return dot_tail(q, k, n / 8 * 8, n, ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7])));
}
// Pairwise sums of neighbouring lanes of a and b: [a0+a1, a2+a3, a4+a5, a6+a7, b0+b1, ...].
inline f8 pair_sums(f8 a, f8 b) {
  return __builtin_shufflevector(a, b, 0, 2, 4, 6, 8, 10, 12, 14) + __builtin_shufflevector(a, b, 1, 3, 5, 7, 9, 11, 13, 15);
}
// The query's dot products with 8 keys (rows k + j * ldk) into out[0..8): dot_key's
// arithmetic, the lane sums of the 8 chains done together by shuffles.
inline void dot_keys8(const float* q, const float* k, int64_t ldk, int64_t n, float* out) {
  const int64_t n8 = n / 8;
  f8 acc[8] = {};
  for (int64_t v = 0; v < n8; ++v) {
    const f8 qv = load8(q + 8 * v);
    for (int j = 0; j < 8; ++j) acc[j] += qv * load8(k + j * ldk + 8 * v);
  }
  const f8 r = pair_sums(pair_sums(pair_sums(acc[0], acc[1]), pair_sums(acc[2], acc[3])),
                         pair_sums(pair_sums(acc[4], acc[5]), pair_sums(acc[6], acc[7])));
  for (int j = 0; j < 8; ++j) out[j] = dot_tail(q, k + j * ldk, n8 * 8, n, r[j]);
}

// y += p * x over n floats; axpy4_row: the same for 4 rows in turn, y read and written once.
inline void axpy_row(float p, const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) store8(y + i, load8(y + i) + p * load8(x + i));
  for (; i < n; ++i) y[i] += p * x[i];
}
inline void axpy4_row(const float p[4], const float* x, int64_t ldx, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    f8 o = load8(y + i);
    o = o + p[0] * load8(x + i);
    o = o + p[1] * load8(x + ldx + i);
    o = o + p[2] * load8(x + 2 * ldx + i);
    o = o + p[3] * load8(x + 3 * ldx + i);
    store8(y + i, o);
  }
  for (; i < n; ++i)
    for (int j = 0; j < 4; ++j) y[i] += p[j] * x[j * ldx + i];
}

// exp(s - mx) in place over n scores; returns their sum.
inline float exp_shifted(float* s, int64_t n, float mx) {
  f8 acc = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const f8 e = vec4::exp(load8(s + i) - mx);
    store8(s + i, e);
    acc += e;
  }
  float sum = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
  for (; i < n; ++i) sum += s[i] = std::exp(s[i] - mx);
  return sum;
}

// Keys [s, s + n) of a cache as floats, row j at the returned pointer + j * hd: in place for
// an f32 cache (ld apart), converted into buf for an f16 one (hd apart); *ld_out says which.
inline const float* cache_rows(KvType type, const void* base, int64_t s, int64_t n, int64_t ld, int64_t c0,
                               int64_t hd, float* buf, int64_t* ld_out) {
  if (type == KvType::F32) {
    *ld_out = ld;
    return static_cast<const float*>(base) + s * ld + c0;
  }
  for (int64_t j = 0; j < n; ++j) from_halves_impl(static_cast<const uint16_t*>(base) + (s + j) * ld + c0, hd, buf + j * hd);
  *ld_out = hd;
  return buf;
}

// Heads of at most kSmallHead values (stories260K's 8, tinystories-656k's 16), a multiple of
// 8: scores and value sums laid out across keys rather than along a head. With so short a
// head, dot_keys8's lane sums (3 rounds of shuffles for 8 products each) and the output row's
// load and store per 4 keys cost more than the products; here the 8 keys' rows of a tile are
// transposed once for all the task's queries and heads (kt[e][j] = key j's value e), and the
// lane l of dot_keys8's chain j becomes lane j of a chain over kt's rows l, l + 8, ...: the
// same products, summed in the same pairs, in vertical adds. The value sums keep one query
// head's output row in registers over all its keys. Every number is computed by the same
// operations in the same order as the general path below, so results are the same bits.

// The scores of one query head against the 8 keys of a transposed tile, times scale, into
// out[0..8): dot_keys8's arithmetic (hd a multiple of 8).
inline void dot_keys8_transposed(const float* q, const float* kt, int64_t hd, float scale, float* out) {
  f8 lane[8];
  for (int l = 0; l < 8; ++l) {
    f8 acc = {};  // from zero, as dot_chain: the first product is rounded alone, as there
    for (int64_t e = l; e < hd; e += 8) acc += q[e] * load8(kt + e * 8);
    lane[l] = acc;
  }
  const f8 r = ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
  for (int j = 0; j < 8; ++j) out[j] = r[j] * scale;  // (as the general path: the sum, then the scale)
}

// out_r = 0, then out_r + p_rj * v_j over keys j in order, for every query head r of a task
// (axpy_row's and axpy4_row's arithmetic; HV: the head's values / 8). One head's sum is a
// chain of dependent additions; kRows heads run side by side so that their chains overlap,
// over the keys they all see, then each on alone over the keys only it sees.
template <int HV>
inline void value_sums(const CachedAttention& a, int64_t t0, int64_t kvh, int64_t group, int64_t n_rows,
                       const float* probs, int64_t max_keys, const float* v, int64_t ld) {
  constexpr int kRows = 8 / HV;
  const int64_t qd = a.n_head * a.hd;
  const auto n_keys = [&](int64_t r) { return a.n_past + t0 + r / group + 1; };
  const auto out_row = [&](int64_t r) { return a.out + (t0 + r / group) * qd + (kvh * group + r % group) * a.hd; };
  for (int64_t r0 = 0; r0 < n_rows; r0 += kRows) {
    const int nr = static_cast<int>(std::min<int64_t>(kRows, n_rows - r0));
    f8 o[kRows][HV] = {};
    const int64_t common = n_keys(r0);  // rows are in query order: the first sees the fewest keys
    if (nr == kRows) {
      for (int64_t j = 0; j < common; ++j)
        for (int r = 0; r < kRows; ++r) {
          const float p = probs[(r0 + r) * max_keys + j];
          for (int c = 0; c < HV; ++c) o[r][c] = o[r][c] + p * load8(v + j * ld + 8 * c);
        }
    } else {
      for (int64_t j = 0; j < common; ++j)
        for (int r = 0; r < nr; ++r) {
          const float p = probs[(r0 + r) * max_keys + j];
          for (int c = 0; c < HV; ++c) o[r][c] = o[r][c] + p * load8(v + j * ld + 8 * c);
        }
    }
    for (int r = 0; r < nr; ++r) {
      const float* pr = probs + (r0 + r) * max_keys;
      for (int64_t j = common; j < n_keys(r0 + r); ++j)
        for (int c = 0; c < HV; ++c) o[r][c] = o[r][c] + pr[j] * load8(v + j * ld + 8 * c);
      float* out = out_row(r0 + r);
      for (int c = 0; c < HV; ++c) store8(out + 8 * c, o[r][c]);
    }
  }
}

// The task of attention_task_impl for a small head (small_head(a.hd)). Scratch: the
// scores (as there), then the tile's transposed keys (8 * hd), then for an f16 cache the
// task's value rows as floats (max_keys * hd).
NL_ATTN_KERNEL void attention_task_small_head(const CachedAttention& a, int64_t t0, int64_t t1, int64_t kvh,
                                              float* scratch) {
  const int64_t hd = a.hd, group = a.n_head / a.n_kv, kvd = a.n_kv * hd, qd = a.n_head * hd, hv = hd / 8;
  const int64_t nq = t1 - t0, max_keys = a.n_past + t1;
  float* scores = scratch;
  float* kt = scratch + nq * group * max_keys;  // 8 * hd; converted rows of an f16 tile first go to vrows
  float* vrows = kt + 8 * kSmallHead;
  const auto first_query = [&](int64_t key) { return std::max<int64_t>(0, key - a.n_past - t0); };
  const float* q0 = a.q + t0 * qd + kvh * group * hd;
  int64_t s = 0, ld;
  for (; s + 8 <= max_keys; s += 8) {
    const float* k = cache_rows(a.type, a.k, s, 8, kvd, kvh * hd, hd, vrows, &ld);
    for (int j = 0; j < 8; ++j)
      for (int64_t e = 0; e < hd; ++e) kt[e * 8 + j] = k[j * ld + e];
    for (int64_t i = first_query(s); i < nq; ++i)
      for (int64_t g = 0; g < group; ++g)
        dot_keys8_transposed(q0 + i * qd + g * hd, kt, hd, a.scale, scores + (i * group + g) * max_keys + s);
  }
  for (; s < max_keys; ++s) {
    const float* k = cache_rows(a.type, a.k, s, 1, kvd, kvh * hd, hd, vrows, &ld);
    for (int64_t i = first_query(s); i < nq; ++i)
      for (int64_t g = 0; g < group; ++g)
        scores[(i * group + g) * max_keys + s] = dot_key(q0 + i * qd + g * hd, k, hd) * a.scale;
  }
  // Probabilities in place of the scores: p_j = exp(s_j - max) * (1 / sum), as the general path.
  const int64_t n_rows = nq * group;  // query heads: row r is query r / group, head r % group
  for (int64_t r = 0; r < n_rows; ++r) {
    const int64_t n_keys = a.n_past + t0 + r / group + 1;
    float* sg = scores + r * max_keys;
    const float inv = 1.0f / exp_shifted(sg, n_keys, vec4::max_of(sg, n_keys));
    for (int64_t j = 0; j < n_keys; ++j) sg[j] = sg[j] * inv;
  }
  // The values, as floats: in place (f32 cache) or converted once for every query head.
  const float* v = cache_rows(a.type, a.v, 0, max_keys, kvd, kvh * hd, hd, vrows, &ld);
  if (hv == 1) value_sums<1>(a, t0, kvh, group, n_rows, scores, max_keys, v, ld);
  else value_sums<2>(a, t0, kvh, group, n_rows, scores, max_keys, v, ld);
}

// value_sums for a tree (attention_task_tree, small heads): every query head r of the task
// sees the n_past cached keys, then its chain's rows (key n_past + d of its probabilities is
// the cache's slot n_past + chain[chain_start[r / group] + d]). The cached keys run for kRows
// heads side by side, then each head's chain alone: axpy_row's arithmetic in key order.
template <int HV>
inline void tree_value_sums(const CachedAttention& a, int64_t t0, int64_t kvh, int64_t group, int64_t n_rows,
                            const float* probs, int64_t max_keys, const float* v, int64_t ld, const int32_t* chain,
                            const int64_t* chain_start) {
  constexpr int kRows = 8 / HV;
  const int64_t qd = a.n_head * a.hd;
  for (int64_t r0 = 0; r0 < n_rows; r0 += kRows) {
    const int nr = static_cast<int>(std::min<int64_t>(kRows, n_rows - r0));
    f8 o[kRows][HV] = {};
    if (nr == kRows) {
      for (int64_t j = 0; j < a.n_past; ++j)
        for (int r = 0; r < kRows; ++r) {
          const float p = probs[(r0 + r) * max_keys + j];
          for (int c = 0; c < HV; ++c) o[r][c] = o[r][c] + p * load8(v + j * ld + 8 * c);
        }
    } else {
      for (int64_t j = 0; j < a.n_past; ++j)
        for (int r = 0; r < nr; ++r) {
          const float p = probs[(r0 + r) * max_keys + j];
          for (int c = 0; c < HV; ++c) o[r][c] = o[r][c] + p * load8(v + j * ld + 8 * c);
        }
    }
    for (int r = 0; r < nr; ++r) {
      const int64_t i = (r0 + r) / group;
      const float* pr = probs + (r0 + r) * max_keys + a.n_past;
      for (int64_t c = chain_start[i]; c < chain_start[i + 1]; ++c) {
        const float* vr = v + (a.n_past + chain[c]) * ld;
        for (int e = 0; e < HV; ++e) o[r][e] = o[r][e] + pr[c - chain_start[i]] * load8(vr + 8 * e);
      }
      float* out = a.out + (t0 + i) * qd + (kvh * group + (r0 + r) % group) * a.hd;
      for (int e = 0; e < HV; ++e) store8(out + 8 * e, o[r][e]);
    }
  }
}

// The task of attention_task_impl for a tree of new rows (a.parent set). Query row t sees
// n_past + depth(t) + 1 keys: the cached positions, then its ancestors' rows from the root
// down, then its own, and its scores are laid out in that order, so the softmax and the value
// sums are those of the same row at position n_past + depth(t) of a causal run over the cache
// plus its ancestors: the same operations in the same order (dot_keys8 and dot_key give a key
// the same bits, and so do axpy4_row and axpy_row), so the same bits. Small heads take the
// small path's layout (transposed key tiles, value sums in registers: the same arithmetic
// again). Scratch as the causal paths'.
NL_ATTN_KERNEL void attention_task_tree(const CachedAttention& a, int64_t t0, int64_t t1, int64_t kvh, float* scratch) {
  const int64_t hd = a.hd, group = a.n_head / a.n_kv, kvd = a.n_kv * hd, qd = a.n_head * hd;
  const int64_t nq = t1 - t0, max_keys = a.n_past + t1;  // a row's depth is at most its index
  const bool small = small_head(hd);
  float* scores = scratch;
  float* rows = scratch + nq * group * max_keys;  // small heads: the transposed tile (8 * kSmallHead), then rows
  float* krows = small ? rows + 8 * kSmallHead : rows;
  const float* q0 = a.q + t0 * qd + kvh * group * hd;
  // The tree rows each query sees, root first: chain[chain_start[i] .. chain_start[i + 1]).
  thread_local std::vector<int32_t> chain;
  int64_t chain_start[kMaxQueryBlock + 1];
  chain.clear();
  for (int64_t i = 0; i < nq; ++i) {
    chain_start[i] = static_cast<int64_t>(chain.size());
    for (int32_t r = static_cast<int32_t>(t0 + i); r >= 0; r = a.parent[r]) chain.push_back(r);
    std::reverse(chain.begin() + chain_start[i], chain.end());
  }
  chain_start[nq] = static_cast<int64_t>(chain.size());
  const auto n_keys = [&](int64_t i) { return a.n_past + chain_start[i + 1] - chain_start[i]; };
  // Scores over the cached positions, tiles of 8 keys for every query, then the tree's keys.
  int64_t s = 0, ld;
  for (; s + 8 <= a.n_past; s += 8) {
    const float* k = cache_rows(a.type, a.k, s, 8, kvd, kvh * hd, hd, krows, &ld);
    if (small) {
      for (int j = 0; j < 8; ++j)
        for (int64_t e = 0; e < hd; ++e) rows[e * 8 + j] = k[j * ld + e];
      for (int64_t i = 0; i < nq; ++i)
        for (int64_t g = 0; g < group; ++g)
          dot_keys8_transposed(q0 + i * qd + g * hd, rows, hd, a.scale, scores + (i * group + g) * max_keys + s);
      continue;
    }
    for (int64_t i = 0; i < nq; ++i)
      for (int64_t g = 0; g < group; ++g) {
        float* out = scores + (i * group + g) * max_keys + s;
        dot_keys8(q0 + i * qd + g * hd, k, ld, hd, out);
        for (int j = 0; j < 8; ++j) out[j] *= a.scale;
      }
  }
  for (; s < a.n_past; ++s) {
    const float* k = cache_rows(a.type, a.k, s, 1, kvd, kvh * hd, hd, krows, &ld);
    for (int64_t i = 0; i < nq; ++i)
      for (int64_t g = 0; g < group; ++g)
        scores[(i * group + g) * max_keys + s] = dot_key(q0 + i * qd + g * hd, k, hd) * a.scale;
  }
  for (int64_t i = 0; i < nq; ++i)
    for (int64_t c = chain_start[i]; c < chain_start[i + 1]; ++c) {
      const float* k = cache_rows(a.type, a.k, a.n_past + chain[static_cast<size_t>(c)], 1, kvd, kvh * hd, hd, krows, &ld);
      for (int64_t g = 0; g < group; ++g)
        scores[(i * group + g) * max_keys + a.n_past + c - chain_start[i]] = dot_key(q0 + i * qd + g * hd, k, hd) * a.scale;
    }
  // Probabilities in place of the scores: p_j = exp(s_j - max) * (1 / sum), as the other paths.
  for (int64_t i = 0; i < nq; ++i) {
    for (int64_t g = 0; g < group; ++g) {
      float* sg = scores + (i * group + g) * max_keys;
      const float inv = 1.0f / exp_shifted(sg, n_keys(i), vec4::max_of(sg, n_keys(i)));
      for (int64_t j = 0; j < n_keys(i); ++j) sg[j] = sg[j] * inv;
    }
    if (!small) std::memset(a.out + (t0 + i) * qd + kvh * group * hd, 0, static_cast<size_t>(group * hd) * sizeof(float));
  }
  if (small) {  // the values of every slot the task reads, as floats: in place or converted once
    const float* v = cache_rows(a.type, a.v, 0, max_keys, kvd, kvh * hd, hd, krows, &ld);
    if (hd == 8) tree_value_sums<1>(a, t0, kvh, group, nq * group, scores, max_keys, v, ld, chain.data(), chain_start);
    else tree_value_sums<2>(a, t0, kvh, group, nq * group, scores, max_keys, v, ld, chain.data(), chain_start);
    return;
  }
  // Values in key order: the cached ones 4 at a time for every query, then each query's tree rows.
  for (s = 0; s < a.n_past; s += 4) {
    const int64_t nk = std::min<int64_t>(4, a.n_past - s);
    const float* v = cache_rows(a.type, a.v, s, nk, kvd, kvh * hd, hd, rows, &ld);
    for (int64_t i = 0; i < nq; ++i)
      for (int64_t g = 0; g < group; ++g) {
        const float* p = scores + (i * group + g) * max_keys + s;
        float* out = a.out + (t0 + i) * qd + (kvh * group + g) * hd;
        if (nk == 4) axpy4_row(p, v, ld, out, hd);
        else for (int64_t j = 0; j < nk; ++j) axpy_row(p[j], v + j * ld, out, hd);
      }
  }
  for (int64_t i = 0; i < nq; ++i)
    for (int64_t c = chain_start[i]; c < chain_start[i + 1]; ++c) {
      const float* v = cache_rows(a.type, a.v, a.n_past + chain[static_cast<size_t>(c)], 1, kvd, kvh * hd, hd, rows, &ld);
      for (int64_t g = 0; g < group; ++g)
        axpy_row(scores[(i * group + g) * max_keys + a.n_past + c - chain_start[i]], v,
                 a.out + (t0 + i) * qd + (kvh * group + g) * hd, hd);
    }
}

NL_ATTN_KERNEL void attention_task_impl(const CachedAttention& a, int64_t t0, int64_t t1, int64_t kvh,
                                        float* scratch) {
  if (a.parent) return attention_task_tree(a, t0, t1, kvh, scratch);
  if (small_head(a.hd)) return attention_task_small_head(a, t0, t1, kvh, scratch);
  const int64_t hd = a.hd, group = a.n_head / a.n_kv, kvd = a.n_kv * hd, qd = a.n_head * hd;
  const int64_t nq = t1 - t0, max_keys = a.n_past + t1;  // query t0 + i sees keys [0, n_past + t0 + i]
  // scores of query i, head g at scores + (i * group + g) * max_keys
  float* scores = scratch;
  float* rows = scratch + nq * group * max_keys;  // up to 8 converted key or value rows
  const auto first_query = [&](int64_t key) { return std::max<int64_t>(0, key - a.n_past - t0); };  // that sees it
  const float* q0 = a.q + t0 * qd + kvh * group * hd;
  int64_t s = 0, ld;
  for (; s + 8 <= max_keys; s += 8) {  // tiles of 8 keys, for every query that sees the first
    const float* k = cache_rows(a.type, a.k, s, 8, kvd, kvh * hd, hd, rows, &ld);
    for (int64_t i = first_query(s); i < nq; ++i)
      for (int64_t g = 0; g < group; ++g) {
        float* out = scores + (i * group + g) * max_keys + s;  // (keys past the query's own: unused)
        dot_keys8(q0 + i * qd + g * hd, k, ld, hd, out);
        for (int j = 0; j < 8; ++j) out[j] *= a.scale;
      }
  }
  for (; s < max_keys; ++s) {
    const float* k = cache_rows(a.type, a.k, s, 1, kvd, kvh * hd, hd, rows, &ld);
    for (int64_t i = first_query(s); i < nq; ++i)
      for (int64_t g = 0; g < group; ++g)
        scores[(i * group + g) * max_keys + s] = dot_key(q0 + i * qd + g * hd, k, hd) * a.scale;
  }
  float inv_sum[kMaxQueryBlock * 64];  // nq <= kMaxQueryBlock, group <= 64 (checked by the decoder)
  for (int64_t i = 0; i < nq; ++i) {
    const int64_t n_keys = a.n_past + t0 + i + 1;
    for (int64_t g = 0; g < group; ++g) {
      float* sg = scores + (i * group + g) * max_keys;
      inv_sum[i * group + g] = 1.0f / exp_shifted(sg, n_keys, vec4::max_of(sg, n_keys));
    }
    std::memset(a.out + (t0 + i) * qd + kvh * group * hd, 0, static_cast<size_t>(group * hd) * sizeof(float));
  }
  // Values in key order: 4 keys at a time for the queries that see all 4, one by one for
  // the others (the same additions in the same order either way).
  for (s = 0; s < max_keys; s += 4) {
    const int64_t nk = std::min<int64_t>(4, max_keys - s);
    const float* v = cache_rows(a.type, a.v, s, nk, kvd, kvh * hd, hd, rows, &ld);
    for (int64_t i = first_query(s); i < nq; ++i) {
      const int64_t visible = std::min(nk, a.n_past + t0 + i + 1 - s);
      float* out = a.out + (t0 + i) * qd + kvh * group * hd;
      for (int64_t g = 0; g < group; ++g) {
        const float* sg = scores + (i * group + g) * max_keys + s;
        const float inv = inv_sum[i * group + g];
        if (visible == 4) {
          const float p[4] = {sg[0] * inv, sg[1] * inv, sg[2] * inv, sg[3] * inv};
          axpy4_row(p, v, ld, out + g * hd, hd);
        } else {
          for (int64_t j = 0; j < visible; ++j) axpy_row(sg[j] * inv, v + j * ld, out + g * hd, hd);
        }
      }
    }
  }
}

}  // namespace
}  // namespace nl::infer
