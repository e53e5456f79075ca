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

// The forward pair of this set (Int8Kernels::forward_pair; the body's forward_tokens_pair512
// is the 256-bit sets' shape widened). Two changes, the same integers and the same f32
// chain per output (bit-identical to the scalar definition):
//  - Column bands: the row groups' panels are read for kBandBlocks blocks (1024 columns,
//    16 KiB of both panels) by every token before the next band, so a down projection's
//    panels (4864 columns, 78 KiB) stay in L1 instead of streaming from L2 once per 8
//    tokens; the f32 sums of a band end in Y and the next band goes on from them (a store
//    and a load of the running sum: exact).
//  - The offset (8 x the activations' sum for nibble panels, 128 x the weights' sums for
//    signed ones) is the sums' starting value instead of a subtraction after them.
//  - 12 tokens at a time, not 8 (12 sums and 12 accumulators, the weight chunk, a broadcast
//    and the flip constant: 27 of the 32 registers): more independent vpdpbusd chains, and
//    each weight chunk's two loads serve 12 tokens.
// Measured in one process, thread CPU time, old and new interleaved (Zen 5, loaded machine,
// one thread, 256 tokens, 16 rows x 896 and x 4864 columns, nibble and signed panels): the
// kernel 0.79-0.85x the 8-token kernel's time with bands and 12 tokens; bands alone
// 0.90-0.97x; two sums per token (even and odd chunks) instead of 12 tokens 0.86-1.15x (spills).
inline constexpr int64_t kBandBlocks = 32;

template <int NT, Int8Kind K>
inline void forward_band512(const int8_t* q, const float* d, const int32_t* sum, int64_t ldq, int64_t b0, int64_t b1,
                            const ForwardPanel& p0, const ForwardPanel& p1, __mmask16 rows, float* Y, int64_t ldy) {
  constexpr bool kSigned = K == Int8Kind::Signed;
  const int64_t blocks = ldq / kQ8Block;
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  __m512 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = b0 == 0 ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(rows, Y + t * ldy);
  for (int64_t b = b0; b < b1; ++b) {
    __m512i part[NT];
    if constexpr (kSigned) {
      const __m512i neg = _mm512_sub_epi32(_mm512_setzero_si512(),
                                           join_halves(p0.wsum.data() + b * 8, p1.wsum.data() + b * 8));
      for (int t = 0; t < NT; ++t) part[t] = neg;
    } else {
      for (int t = 0; t < NT; ++t) part[t] = _mm512_set1_epi32(-8 * sum[t * blocks + b]);
    }
    const uint8_t *w0 = p0.q.data() + b * 256, *w1 = p1.q.data() + b * 256;
    const int8_t* x = q + b * kQ8Block;
#pragma GCC unroll 8
    for (int c = 0; c < 8; ++c) {
      const __m512i w = join_halves(w0 + 32 * c, w1 + 32 * c);
      for (int t = 0; t < NT; ++t) {
        int32_t v;
        std::memcpy(&v, x + t * ldq + 4 * c, 4);
        const __m512i xc = _mm512_set1_epi32(v);
        part[t] = kSigned ? _mm512_dpbusd_epi32(part[t], _mm512_xor_si512(xc, flip), w)
                          : _mm512_dpbusd_epi32(part[t], w, xc);
        keep_in_register(part[t]);
      }
    }
    const __m512 dw = _mm512_castsi512_ps(join_halves(p0.d.data() + b * 8, p1.d.data() + b * 8));
    for (int t = 0; t < NT; ++t)
      acc[t] = _mm512_fmadd_ps(to_float(part[t]), _mm512_mul_ps(dw, _mm512_set1_ps(d[t * blocks + b])), acc[t]);
  }
  for (int t = 0; t < NT; ++t) _mm512_mask_storeu_ps(Y + t * ldy, rows, acc[t]);
}

template <Int8Kind K>
void forward_pair512_kind(const int8_t* q, const float* d, const int32_t* sum, int64_t ldq, int64_t nt,
                          const ForwardPanel& p0, const ForwardPanel& p1, int64_t nr1, float* Y, int64_t ldy) {
  const int64_t blocks = ldq / kQ8Block;
  const __mmask16 rows = static_cast<__mmask16>(0xFFu | (((1u << nr1) - 1u) << 8));
  for (int64_t b0 = 0; b0 < p0.blocks; b0 += kBandBlocks) {
    const int64_t b1 = std::min(p0.blocks, b0 + kBandBlocks);
    int64_t t = 0;
    for (; t + 12 <= nt; t += 12)
      forward_band512<12, K>(q + t * ldq, d + t * blocks, sum + t * blocks, ldq, b0, b1, p0, p1, rows, Y + t * ldy, ldy);
    for (; t + 4 <= nt; t += 4)
      forward_band512<4, K>(q + t * ldq, d + t * blocks, sum + t * blocks, ldq, b0, b1, p0, p1, rows, Y + t * ldy, ldy);
    for (; t < nt; ++t)
      forward_band512<1, K>(q + t * ldq, d + t * blocks, sum + t * blocks, ldq, b0, b1, p0, p1, rows, Y + t * ldy, ldy);
  }
}

void forward_pair512(const int8_t* q, const float* d, const int32_t* sum, int64_t ldq, int64_t nt,
                     const ForwardPanel& p0, const ForwardPanel& p1, int64_t nr1, float* Y, int64_t ldy) {
  if (p0.kind == Int8Kind::Nibble && p1.kind == Int8Kind::Nibble)
    forward_pair512_kind<Int8Kind::Nibble>(q, d, sum, ldq, nt, p0, p1, nr1, Y, ldy);
  else if (p0.kind == Int8Kind::Signed && p1.kind == Int8Kind::Signed)
    forward_pair512_kind<Int8Kind::Signed>(q, d, sum, ldq, nt, p0, p1, nr1, Y, ldy);
  else
    forward_pair_by_calls<forward_avx2>(q, d, sum, ldq, nt, p0, p1, nr1, Y, ldy);
}

// The input gradient of this set: the body's (input_grad_kind: passes of column blocks,
// chunks of 32 tokens requantized, then their products) with two changes, the same
// integers and f32 chain per output:
//  - dY is requantized 64 rows at a time in 512-bit registers (requantize_grad_value's two
//    vpmulhrsw, then one pack per block, where the 256-bit code needs twice the
//    instructions): in the step's profile the requantization was a quarter of the input
//    gradient kernel's samples.
//  - The products run 12 tokens at a time instead of 8 (24 sums, two weight registers and
//    a broadcast: 27 registers), then 8, 4 and 1.
// For the per-lane pack to give the 64 quants in order, y16 and rho16 are split into the
// values 0-7, 16-23, 32-39, 48-55 (A) and 8-15, 24-31, 40-47, 56-63 (B): qwords 0,1,4,5 and
// 2,3,6,7 of each 32-value half.
inline __m512i split_a(const int16_t* v) {
  const __m512i idx = _mm512_setr_epi64(0, 1, 4, 5, 8, 9, 12, 13);
  return _mm512_permutex2var_epi64(_mm512_loadu_si512(v), idx, _mm512_loadu_si512(v + 32));
}
inline __m512i split_b(const int16_t* v) {
  const __m512i idx = _mm512_setr_epi64(2, 3, 6, 7, 10, 11, 14, 15);
  return _mm512_permutex2var_epi64(_mm512_loadu_si512(v), idx, _mm512_loadu_si512(v + 32));
}

struct GradPass512 {
  GradPass pass;  // qv, e and colsum as the body's products read them
  __m512i rho_a[kGradBlocksPerPass], rho_b[kGradBlocksPerPass];  // rho16 split (split_a, split_b)
};

template <bool kUnsigned>
inline void requantize_grad_token512(const int16_t* y16, float ey, const GradPass512& gp, const GradPanel& p,
                                     int64_t b0, int64_t nb, int8_t* qv, float* e) {
  const __m512i ya = split_a(y16), yb = split_b(y16), k256 = _mm512_set1_epi16(256);
  for (int64_t i = 0; i < nb; ++i) {
    const __m512i qa = _mm512_mulhrs_epi16(_mm512_mulhrs_epi16(ya, gp.rho_a[i]), k256);
    const __m512i qb = _mm512_mulhrs_epi16(_mm512_mulhrs_epi16(yb, gp.rho_b[i]), k256);
    __m512i packed = _mm512_packs_epi16(qa, qb);
    if constexpr (kUnsigned) packed = _mm512_xor_si512(packed, _mm512_set1_epi8(static_cast<char>(0x80)));
    _mm512_storeu_si512(qv + i * kGradRowBlock, packed);
  }
  if (nb == kGradBlocksPerPass) {
    _mm256_storeu_ps(e, _mm256_mul_ps(_mm256_set1_ps(ey), _mm256_loadu_ps(p.m.data() + b0)));
  } else {
    for (int64_t i = 0; i < nb; ++i) e[i] = ey * p.m[static_cast<size_t>(b0 + i)];
  }
}

#ifndef NL_GRAD_NT
#define NL_GRAD_NT 12
#endif
template <GradStart S>
__attribute__((noinline)) void grad_chunk_products512(const GradPass& pass, int64_t ct, const GradPanel& p, int64_t b0,
                                                      int64_t nb, int64_t n, const float* A, int64_t lda, float* D,
                                                      int64_t ldd) {
  int64_t i = 0;
  for (; i + NL_GRAD_NT <= ct; i += NL_GRAD_NT)
    grad_pass_products512<NL_GRAD_NT, S>(pass, i, p, b0, nb, n, A + i * lda, lda, D + i * ldd, ldd);
  for (; i + 8 <= ct; i += 8) grad_pass_products512<8, S>(pass, i, p, b0, nb, n, A + i * lda, lda, D + i * ldd, ldd);
  for (; i + 4 <= ct; i += 4) grad_pass_products512<4, S>(pass, i, p, b0, nb, n, A + i * lda, lda, D + i * ldd, ldd);
  for (; i < ct; ++i) grad_pass_products512<1, S>(pass, i, p, b0, nb, n, A + i * lda, lda, D + i * ldd, ldd);
}

template <Int8Kind K>
void input_grad512_kind(const int16_t* Y, int64_t ldg, const float* ey, int64_t lds, int64_t nt, const GradPanel& p,
                        int64_t n, const GradOut& out) {
  constexpr bool kUnsigned = kUnsignedGradActivations<K>;  // (always, with VNNI)
  GradPass512 gp;
  GradPass& pass = gp.pass;
  for (int64_t b0 = 0; b0 < p.blocks; b0 += kGradBlocksPerPass) {
    const int64_t nb = std::min(kGradBlocksPerPass, p.blocks - b0);
    prepare_pass<kUnsigned>(p, b0, nb, pass);  // (its rho: the 256-bit split, unused here)
    for (int64_t b = 0; b < nb; ++b) {
      gp.rho_a[b] = split_a(p.rho16.data() + (b0 + b) * kGradRowBlock);
      gp.rho_b[b] = split_b(p.rho16.data() + (b0 + b) * kGradRowBlock);
    }
    for (int64_t t0 = 0; t0 < nt; t0 += kGradChunkTokens) {
      const int64_t ct = std::min(kGradChunkTokens, nt - t0);
      const int16_t* Yc = Y + t0 * ldg;
      for (int64_t i = 0; i < ct; ++i) {  // (prefetched 16 tokens ahead: requantize_grad_chunk)
        const uintptr_t ahead = reinterpret_cast<uintptr_t>(Yc + i * ldg) + 16 * ldg * sizeof(int16_t);
        _mm_prefetch(reinterpret_cast<const char*>(ahead), _MM_HINT_T0);
        requantize_grad_token512<kUnsigned>(Yc + i * ldg, ey[(t0 + i) * lds], gp, p, b0, nb, pass.qv[i], pass.e[i]);
      }
      const GradOut o = out.from_token(t0);
      if (!o.acc)
        grad_chunk_products512<GradStart::Zero>(pass, ct, p, b0, nb, n, nullptr, 0, o.D, o.ldd);
      else if (o.acc == o.D && o.lda == o.ldd)
        grad_chunk_products512<GradStart::InPlace>(pass, ct, p, b0, nb, n, nullptr, 0, o.D, o.ldd);
      else
        grad_chunk_products512<GradStart::Apart>(pass, ct, p, b0, nb, n, o.acc, o.lda, o.D, o.ldd);
    }
  }
}

void input_grad512(const int16_t* Y, int64_t ldg, const float* ey, int64_t lds, int64_t nt, const GradPanel& p,
                   int64_t n, const GradOut& out) {
  if (p.kind == Int8Kind::Nibble)
    input_grad512_kind<Int8Kind::Nibble>(Y, ldg, ey, lds, nt, p, n, out);
  else
    input_grad512_kind<Int8Kind::Signed>(Y, ldg, ey, lds, nt, p, n, out);
}

Int8Kernels avx512_vnni_kernels() {
  Int8Kernels k = avx2_int8_kernels("avx512-vnni");
  k.forward_pair = forward_pair512;
  k.input_grad = input_grad512;
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
  static const Int8Kernels k = avx512_vnni_kernels();
  return x86_features().avx512_vnni ? &k : nullptr;
}

}  // namespace nl::engine

#else

namespace nl::engine {
const Int8Kernels* int8_kernels_avx512_vnni() { return nullptr; }
}  // namespace nl::engine

#endif
