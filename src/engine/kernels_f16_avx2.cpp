// f16 rounding with F16C (vcvtps2ph rounds to nearest even, subnormals included: the same
// values as nl::f32_to_fp16). Compiled for AVX2+F16C function by function, handed out only
// when the CPU has them.
#include "range_guard.h"
#include "cpu_features_x86.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include <cmath>

#include "nightlora/util/half.h"

#if defined(__clang__)  // clang ignores GCC target pragmas: the same features, per function
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif

namespace nl::engine {
namespace {

float max_abs_avx2(const float* x, int64_t n) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 m = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) m = _mm256_max_ps(m, _mm256_and_ps(_mm256_loadu_ps(x + i), abs_mask));
  __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  h = _mm_max_ps(h, _mm_movehl_ps(h, h));
  h = _mm_max_ss(h, _mm_movehdup_ps(h));
  float r = _mm_cvtss_f32(h);
  for (; i < n; ++i) r = std::fmax(r, std::fabs(x[i]));
  return r;
}

void round_f16_avx2(const float* x, int64_t n, float scale_in, float scale_out, float* out) {
  const __m256 si = _mm256_set1_ps(scale_in), so = _mm256_set1_ps(scale_out);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_mul_ps(_mm256_loadu_ps(x + i), si), _MM_FROUND_TO_NEAREST_INT);
    _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_cvtph_ps(h), so));
  }
  for (; i < n; ++i) out[i] = fp16_to_f32(f32_to_fp16(x[i] * scale_in)) * scale_out;
}

}  // namespace
}  // namespace nl::engine

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

namespace nl::engine {
const F16Kernels* f16_kernels_avx2() {
  static const bool cpu_has_it = x86_features().avx2;
  static const F16Kernels k{"avx2", max_abs_avx2, round_f16_avx2};
  return cpu_has_it ? &k : nullptr;
}
}  // namespace nl::engine

#else

namespace nl::engine {
const F16Kernels* f16_kernels_avx2() { return nullptr; }
}  // namespace nl::engine

#endif
