// The attention kernels of cached_attention.h, compiled once portably (cached_attention.cpp)
// and once under an AVX2 + F16C + FMA target pragma (cached_attention_avx2.cpp). The
// including file defines NL_ATTN_F16C (1: F16C conversions) before including this; every
// function has internal linkage, so each compilation is its own set.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstring>

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

// Row `pos` of a cache (positions x ld elements), columns [c0, c0 + n), as floats: in place
// for an f32 cache, converted into buf for an f16 one.
inline const float* cache_row(KvType type, const void* base, int64_t pos, int64_t ld, int64_t c0, int64_t n,
                              float* buf) {
  if (type == KvType::F32) return static_cast<const float*>(base) + pos * ld + c0;
  from_halves_impl(static_cast<const uint16_t*>(base) + pos * ld + c0, n, buf);
  return buf;
}

inline float dot_row(const float* a, const float* b, int64_t n) {
  f8 s0 = {}, s1 = {};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    s0 += load8(a + i) * load8(b + i);
    s1 += load8(a + i + 8) * load8(b + i + 8);
  }
  for (; i + 8 <= n; i += 8) s0 += load8(a + i) * load8(b + i);
  const f8 v = s0 + s1;  // (lanes summed in place: an f8 passed by value changes the ABI without AVX)
  float s = ((v[0] + v[4]) + (v[1] + v[5])) + ((v[2] + v[6]) + (v[3] + v[7]));
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

// y += p * x over n floats.
inline void axpy_row(float p, const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) store8(y + i, load8(y + i) + p * load8(x + i));
  for (; i < n; ++i) y[i] += p * x[i];
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

NL_ATTN_KERNEL void attention_task_impl(const CachedAttention& a, int64_t t0, int64_t t1, int64_t kvh,
                                        float* scratch) {
  const int64_t hd = a.hd, group = a.n_head / a.n_kv, kvd = a.n_kv * hd, qd = a.n_head * hd;
  const int64_t nq = t1 - t0, max_keys = a.n_past + t1;  // query t sees keys [0, n_past + t]
  // scores of query i, head g at scores + (i * group + g) * max_keys
  float* scores = scratch;
  float* row = scratch + nq * group * max_keys;  // one converted key or value row
  for (int64_t s = 0; s < max_keys; ++s) {
    const float* k = cache_row(a.type, a.k, s, kvd, kvh * hd, hd, row);
    for (int64_t i = std::max<int64_t>(0, s - a.n_past - t0); i < nq; ++i) {  // the queries that see key s
      const float* q = a.q + (t0 + i) * qd + kvh * group * hd;
      for (int64_t g = 0; g < group; ++g) scores[(i * group + g) * max_keys + s] = dot_row(q + g * hd, k, hd) * a.scale;
    }
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
  for (int64_t s = 0; s < max_keys; ++s) {
    const float* v = cache_row(a.type, a.v, s, kvd, kvh * hd, hd, row);
    for (int64_t i = std::max<int64_t>(0, s - a.n_past - t0); i < nq; ++i) {
      float* out = a.out + (t0 + i) * qd + kvh * group * hd;
      for (int64_t g = 0; g < group; ++g)
        axpy_row(scores[(i * group + g) * max_keys + s] * inv_sum[i * group + g], v, out + g * hd, hd);
    }
  }
}

}  // namespace
}  // namespace nl::infer
