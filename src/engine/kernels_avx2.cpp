// AVX2 + FMA + F16C panel kernels. Compiled for those instructions function by function
// (the pragma below), so the library still runs on any x86-64; dispatch.cpp only hands
// them out when __builtin_cpu_supports says the CPU has all three.
//
// Register blocking: forward keeps 4 rows x 3 tokens of 8-lane partial dot products in
// 12 registers (7 loads per 12 FMAs); input grad keeps 3 tokens x 32 columns of dX in
// 12 registers and streams the panel rows through them (7 loads per 12 FMAs).
#include "kernels.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include <cstring>

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

namespace nl::engine {
namespace {

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// F16C converts every half (subnormals included) exactly, and each element is one float
// multiply, as in the reference dequantizer: the output is bit-identical to it.
void dequantize_tiles_avx2(const TiledMatrix& m, int64_t g, int64_t b0, int64_t b1, float* panel, int64_t ld) {
  const int64_t nr = m.group_rows(g);
  const size_t quant_bytes = m.block_bytes - sizeof(uint16_t);
  const __m128i low_nibbles = _mm_set1_epi8(0x0F), eight = _mm_set1_epi8(8);
  for (int64_t b = b0; b < b1; ++b) {
    const uint8_t* t = m.tile(g, b);
    const uint8_t* quants = t + static_cast<size_t>(nr) * sizeof(uint16_t);
    for (int64_t i = 0; i < nr; ++i) {
      uint16_t dbits;
      std::memcpy(&dbits, t + i * 2, 2);
      const __m256 d = _mm256_set1_ps(_cvtsh_ss(dbits));
      const uint8_t* q = quants + static_cast<size_t>(i) * quant_bytes;
      float* y = panel + i * ld + (b - b0) * kTileCols;
      __m128i lo, hi;  // elements 0..15 and 16..31 as signed bytes
      if (m.type == QType::Q4_0) {
        const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
        lo = _mm_sub_epi8(_mm_and_si128(raw, low_nibbles), eight);
        hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(raw, 4), low_nibbles), eight);
      } else {
        lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
        hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 16));
      }
      _mm256_storeu_ps(y + 0, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo)), d));
      _mm256_storeu_ps(y + 8, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8))), d));
      _mm256_storeu_ps(y + 16, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi)), d));
      _mm256_storeu_ps(y + 24, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8))), d));
    }
  }
}

// R rows x NT tokens of Y, each a dot product over n columns.
template <int R, int NT>
inline void forward_block(const float* X, int64_t ldx, const float* P, int64_t ldp, int64_t n, float* Y, int64_t ldy) {
  __m256 acc[NT][R];
  for (int t = 0; t < NT; ++t)
    for (int r = 0; r < R; ++r) acc[t][r] = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) {
    __m256 w[R];
    for (int r = 0; r < R; ++r) w[r] = _mm256_loadu_ps(P + r * ldp + k);
    for (int t = 0; t < NT; ++t) {
      const __m256 x = _mm256_loadu_ps(X + t * ldx + k);
      for (int r = 0; r < R; ++r) acc[t][r] = _mm256_fmadd_ps(x, w[r], acc[t][r]);
    }
  }
  for (int t = 0; t < NT; ++t)
    for (int r = 0; r < R; ++r) {
      float s = hsum(acc[t][r]);
      for (int64_t j = k; j < n; ++j) s += X[t * ldx + j] * P[r * ldp + j];
      Y[t * ldy + r] = s;
    }
}

template <int R>
inline void forward_rows(const float* X, int64_t ldx, int64_t nt, const float* P, int64_t ldp, int64_t n, float* Y,
                         int64_t ldy) {
  int64_t t = 0;
  for (; t + 3 <= nt; t += 3) forward_block<R, 3>(X + t * ldx, ldx, P, ldp, n, Y + t * ldy, ldy);
  for (; t < nt; ++t) forward_block<R, 1>(X + t * ldx, ldx, P, ldp, n, Y + t * ldy, ldy);
}

void forward_avx2(const float* X, int64_t ldx, int64_t nt, const float* P, int64_t ldp, int64_t nr, int64_t n,
                  float* Y, int64_t ldy) {
  int64_t i = 0;
  for (; i + 4 <= nr; i += 4) forward_rows<4>(X, ldx, nt, P + i * ldp, ldp, n, Y + i, ldy);
  for (; i < nr; ++i) forward_rows<1>(X, ldx, nt, P + i * ldp, ldp, n, Y + i, ldy);
}

// NT tokens x (V vectors of 8 columns) of D, accumulated over the nr panel rows in order.
template <int NT, int V>
inline void input_grad_block(const float* G, int64_t ldg, const float* P, int64_t ldp, int64_t nr, float* D,
                             int64_t ldd) {
  __m256 acc[NT][V];
  for (int t = 0; t < NT; ++t)
    for (int v = 0; v < V; ++v) acc[t][v] = _mm256_loadu_ps(D + t * ldd + 8 * v);
  for (int64_t i = 0; i < nr; ++i) {
    __m256 w[V];
    for (int v = 0; v < V; ++v) w[v] = _mm256_loadu_ps(P + i * ldp + 8 * v);
    for (int t = 0; t < NT; ++t) {
      const __m256 a = _mm256_broadcast_ss(G + t * ldg + i);
      for (int v = 0; v < V; ++v) acc[t][v] = _mm256_fmadd_ps(a, w[v], acc[t][v]);
    }
  }
  for (int t = 0; t < NT; ++t)
    for (int v = 0; v < V; ++v) _mm256_storeu_ps(D + t * ldd + 8 * v, acc[t][v]);
}

template <int NT>
inline void input_grad_tokens(const float* G, int64_t ldg, const float* P, int64_t ldp, int64_t nr, int64_t n,
                              float* D, int64_t ldd) {
  int64_t k = 0;
  for (; k + 32 <= n; k += 32) input_grad_block<NT, 4>(G, ldg, P + k, ldp, nr, D + k, ldd);
  for (; k + 8 <= n; k += 8) input_grad_block<NT, 1>(G, ldg, P + k, ldp, nr, D + k, ldd);
  for (; k < n; ++k)  // columns left over when n is not a multiple of 8 (f32/f16 weights)
    for (int t = 0; t < NT; ++t) {
      float s = D[t * ldd + k];
      for (int64_t i = 0; i < nr; ++i) s += G[t * ldg + i] * P[i * ldp + k];
      D[t * ldd + k] = s;
    }
}

void input_grad_avx2(const float* G, int64_t ldg, int64_t nt, const float* P, int64_t ldp, int64_t nr, int64_t n,
                     float* D, int64_t ldd) {
  int64_t t = 0;
  for (; t + 3 <= nt; t += 3) input_grad_tokens<3>(G + t * ldg, ldg, P, ldp, nr, n, D + t * ldd, ldd);
  for (; t < nt; ++t) input_grad_tokens<1>(G + t * ldg, ldg, P, ldp, nr, n, D + t * ldd, ldd);
}

}  // namespace
}  // namespace nl::engine

#pragma GCC pop_options

namespace nl::engine {

const PanelKernels* avx2_kernels() {
  static const bool cpu_has_it =
      __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
  static const PanelKernels k{"avx2", dequantize_tiles_avx2, forward_avx2, input_grad_avx2};
  return cpu_has_it ? &k : nullptr;
}

}  // namespace nl::engine

#else

namespace nl::engine {
const PanelKernels* avx2_kernels() { return nullptr; }
}  // namespace nl::engine

#endif
