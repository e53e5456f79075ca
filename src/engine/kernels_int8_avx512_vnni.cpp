// The AVX2 int8 kernel set with AVX-512 VNNI dot products (kernels_int8_avx2_body.h with
// NL_INT8_VNNI = NL_INT8_VNNI_EVEX = 1: the EVEX vpdpbusd of Ice Lake and later Xeons, Zen 4
// and Zen 5, which CPUs without AVX-VNNI's VEX form still have). Bit-identical to the other
// AVX2 sets; handed out only where the CPU and the OS support AVX512F/BW/VL/VNNI
// (x86_features()).
#include "kernels_int8.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "cpu_features_x86.h"

#if defined(__clang__)  // clang ignores GCC target pragmas: the same features, per function
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")
#endif
#define NL_INT8_VNNI 1
#define NL_INT8_VNNI_EVEX 1
#include "kernels_int8_avx2_body.h"

namespace nl::engine {
namespace {

// Int8Kernels::forward_quad: the body's 512-bit forward pair (forward_tokens_pair512) with
// four row groups: chunk c of groups 0, 1 in one register and of groups 2, 3 in another,
// so each activation broadcast feeds two vpdpbusd (32 rows). The forward pair issues one
// broadcast per vpdpbusd, and that bounds it: measured in one process (thread CPU time, Zen
// 5, one thread, 256 tokens, 16 rows x 896 columns, Q4_0 panels), the pair ran 0.63x its
// time with its 8 tokens' broadcasts merged into one (wrong sums, a probe), unchanged with
// the broadcast folded into vpdpbusd ({1to16}), with the activations' prefetch or with
// column bands that keep the panels in L1. 6 tokens at a time: 12 sums, 12 accumulators,
// two weight registers, a broadcast and the flip constant (28 of 32 registers).
// The same integers and the same f32 chain per output as the pair (bit-identical to the
// scalar definition); the offsets (8 x the activations' sum for nibble panels, 128 x the
// weights' sums for signed ones) are the sums' starting values.
template <int NT, Int8Kind K>
inline void forward_tokens_quad512(const int8_t* q, const float* d, const int32_t* sum, int64_t ldq,
                                   const ForwardPanel* const p[4], __mmask16 rows23, float* Y, int64_t ldy) {
  constexpr bool kSigned = K == Int8Kind::Signed;
  const int64_t blocks = ldq / kQ8Block;
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  __m512 acc01[NT], acc23[NT];
  for (int t = 0; t < NT; ++t) acc01[t] = acc23[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < p[0]->blocks; ++b) {
    __m512i s01[NT], s23[NT];
    if constexpr (kSigned) {
      const __m512i zero = _mm512_setzero_si512();
      const __m512i n01 = _mm512_sub_epi32(zero, join_halves(p[0]->wsum.data() + b * 8, p[1]->wsum.data() + b * 8));
      const __m512i n23 = _mm512_sub_epi32(zero, join_halves(p[2]->wsum.data() + b * 8, p[3]->wsum.data() + b * 8));
      for (int t = 0; t < NT; ++t) s01[t] = n01, s23[t] = n23;
    } else {
      for (int t = 0; t < NT; ++t) s01[t] = s23[t] = _mm512_set1_epi32(-8 * sum[t * blocks + b]);
    }
    const uint8_t *w0 = p[0]->q.data() + b * 256, *w1 = p[1]->q.data() + b * 256;
    const uint8_t *w2 = p[2]->q.data() + b * 256, *w3 = p[3]->q.data() + b * 256;
    const int8_t* x = q + b * kQ8Block;
#pragma GCC unroll 8
    for (int c = 0; c < 8; ++c) {
      const __m512i w01 = join_halves(w0 + 32 * c, w1 + 32 * c), w23 = join_halves(w2 + 32 * c, w3 + 32 * c);
      for (int t = 0; t < NT; ++t) {
        int32_t v;
        std::memcpy(&v, x + t * ldq + 4 * c, 4);
        __m512i xc = _mm512_set1_epi32(v);
        if constexpr (kSigned) {  // unsigned activations q + 128 against the signed weights
          xc = _mm512_xor_si512(xc, flip);
          s01[t] = _mm512_dpbusd_epi32(s01[t], xc, w01);
          s23[t] = _mm512_dpbusd_epi32(s23[t], xc, w23);
        } else {  // unsigned nibbles against the signed activations
          s01[t] = _mm512_dpbusd_epi32(s01[t], w01, xc);
          s23[t] = _mm512_dpbusd_epi32(s23[t], w23, xc);
        }
        keep_in_register(s01[t]);
        keep_in_register(s23[t]);
      }
    }
    const __m512 dw01 = _mm512_castsi512_ps(join_halves(p[0]->d.data() + b * 8, p[1]->d.data() + b * 8));
    const __m512 dw23 = _mm512_castsi512_ps(join_halves(p[2]->d.data() + b * 8, p[3]->d.data() + b * 8));
    for (int t = 0; t < NT; ++t) {
      const __m512 dx = _mm512_set1_ps(d[t * blocks + b]);
      acc01[t] = _mm512_fmadd_ps(to_float(s01[t]), _mm512_mul_ps(dw01, dx), acc01[t]);
      acc23[t] = _mm512_fmadd_ps(to_float(s23[t]), _mm512_mul_ps(dw23, dx), acc23[t]);
    }
  }
  for (int t = 0; t < NT; ++t) {
    _mm512_storeu_ps(Y + t * ldy, acc01[t]);
    _mm512_mask_storeu_ps(Y + t * ldy + 16, rows23, acc23[t]);
  }
}

template <Int8Kind K>
void forward_quad_kind(const int8_t* q, const float* d, const int32_t* sum, int64_t ldq, int64_t nt,
                       const ForwardPanel* const p[4], __mmask16 rows23, float* Y, int64_t ldy) {
  const int64_t blocks = ldq / kQ8Block;
  int64_t t = 0;
  for (; t + 6 <= nt; t += 6)
    forward_tokens_quad512<6, K>(q + t * ldq, d + t * blocks, sum + t * blocks, ldq, p, rows23, Y + t * ldy, ldy);
  // (256 and 64 tokens leave 4: one token at a time they took 1.6% of the step's samples.)
  for (; t + 4 <= nt; t += 4)
    forward_tokens_quad512<4, K>(q + t * ldq, d + t * blocks, sum + t * blocks, ldq, p, rows23, Y + t * ldy, ldy);
  for (; t < nt; ++t)
    forward_tokens_quad512<1, K>(q + t * ldq, d + t * blocks, sum + t * blocks, ldq, p, rows23, Y + t * ldy, ldy);
}

void forward_quad512(const int8_t* q, const float* d, const int32_t* sum, int64_t ldq, int64_t nt,
                     const ForwardPanel* const p[4], int64_t nr3, float* Y, int64_t ldy) {
  const auto nibbles = [&](bool n) {  // (Signed5 panels are signed ones to vpdpbusd)
    return (p[0]->kind == Int8Kind::Nibble) == n && (p[1]->kind == Int8Kind::Nibble) == n &&
           (p[2]->kind == Int8Kind::Nibble) == n && (p[3]->kind == Int8Kind::Nibble) == n;
  };
  // (Mixed kinds: not made by one matrix; Signed6 panels: the 256-bit code, for their scales.)
  if ((!nibbles(true) && !nibbles(false)) || p[0]->kind == Int8Kind::Signed6) {
    forward_pair_avx2(q, d, sum, ldq, nt, *p[0], *p[1], 8, Y, ldy);
    forward_pair_avx2(q, d, sum, ldq, nt, *p[2], *p[3], nr3, Y + 16, ldy);
    return;
  }
  const __mmask16 rows23 = static_cast<__mmask16>(0xFFu | (((1u << nr3) - 1u) << 8));
  if (p[0]->kind == Int8Kind::Nibble)
    forward_quad_kind<Int8Kind::Nibble>(q, d, sum, ldq, nt, p, rows23, Y, ldy);
  else
    forward_quad_kind<Int8Kind::Signed>(q, d, sum, ldq, nt, p, rows23, Y, ldy);
}

Int8Kernels avx512_vnni_kernels() {
  Int8Kernels k = avx2_int8_kernels("avx512-vnni");
  k.forward_quad = forward_quad512;
  return k;
}

}  // namespace
}  // namespace nl::engine
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

namespace nl::engine {

const Int8Kernels* int8_kernels_avx512_vnni() {
  // The check comes first: avx512_vnni_kernels() is compiled for AVX-512 (GCC fills the
  // table with zmm moves), so even building the table is an illegal instruction elsewhere.
  if (!x86_features().avx512_vnni) return nullptr;
  static const Int8Kernels k = avx512_vnni_kernels();
  return &k;
}

}  // namespace nl::engine

#else

namespace nl::engine {
const Int8Kernels* int8_kernels_avx512_vnni() { return nullptr; }
}  // namespace nl::engine

#endif
