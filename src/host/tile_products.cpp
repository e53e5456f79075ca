#include "tile_products.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "vec4.h"

namespace nl::tile {
namespace {

using vec4::f4;
using vec4::store_n;

// The lane sums of a, b, c, d as the four lanes of one vector. (__builtin_shufflevector:
// GCC 12 and clang both have it; GCC's __builtin_shuffle is not in clang, which builds the
// sanitized server of build-fuzz/.)
f4 lane_sums(f4 a, f4 b, f4 c, f4 d) {
  const f4 ab = __builtin_shufflevector(a, b, 0, 4, 1, 5) + __builtin_shufflevector(a, b, 2, 6, 3, 7);
  const f4 cd = __builtin_shufflevector(c, d, 0, 4, 1, 5) + __builtin_shufflevector(c, d, 2, 6, 3, 7);
  return __builtin_shufflevector(ab, cd, 0, 1, 4, 5) + __builtin_shufflevector(ab, cd, 2, 3, 6, 7);
}

using vec4::f8;
using vec4::f8u;
using vec4::halves_sum;
using vec4::load8;

// L floats as one vector: eight (vec4::f8: one AVX register in the x86-64-v3 build) or,
// in the AVX-512 build (weighted_rows_wide etc. below), sixteen (one 512-bit register).
template <int L>
struct VecOf;
template <>
struct VecOf<8> {
  using type = f8;
  static type load(const float* p) { return load8(p); }
  static void store(float* p, type v) { *reinterpret_cast<f8u*>(p) = v; }
};
using f16v = float __attribute__((vector_size(64)));
typedef float f16vu __attribute__((vector_size(64), aligned(4)));
template <>
struct VecOf<16> {
  using type = f16v;
  static type load(const float* p) { return *reinterpret_cast<const f16vu*>(p); }
  static void store(float* p, type v) { *reinterpret_cast<f16vu*>(p) = v; }
};
template <int L>
using Vec = typename VecOf<L>::type;

// Columns [i, i+L) of a row as one vector. Full slabs (kFull) move whole vectors; the last,
// partial slab of a row (eight-float slabs only) has n real lanes, the others zero. The
// loops below run every full slab first and the partial one after, so no branch sits in
// their inner loops.
template <bool kFull, int L = 8>
struct Slab {
  static_assert(kFull || L == 8, "only eight-float slabs are partial");
  int64_t n = L;
  Slab(int64_t i, int64_t cols) {
    if constexpr (!kFull) n = std::min<int64_t>(8, cols - i);
  }
  Vec<L> load(const float* p) const {
    if constexpr (kFull) {
      return VecOf<L>::load(p);
    } else {
      f8 v = {};
      std::memcpy(&v, p, static_cast<size_t>(n) * sizeof(float));
      return v;
    }
  }
  void store(float* p, Vec<L> v) const {
    if constexpr (kFull)
      VecOf<L>::store(p, v);
    else
      std::memcpy(p, &v, static_cast<size_t>(n) * sizeof(float));
  }
};

// Calls f.template operator()<kFull, W, L>(i) over the slabs of [0, n): with L = 16 (the
// AVX-512 build) groups of kWide16 full 16-float slabs, then single ones; then (L = 8, or
// what L = 16 leaves) groups of kWide full 8-float slabs, single full ones and the partial
// one, so no branch sits in the kernels' inner loops. The products below compute every
// output column by itself (a chain over j or t in one lane), so the slab width changes
// which register lane holds an output, never its arithmetic: both widths give the same bits.
template <int kWide, int kWide16, int L, class F>
void for_slabs(int64_t n, F&& f) {
  int64_t i = 0;
  if constexpr (L == 16) {
    for (; i + 16 * kWide16 <= n; i += 16 * kWide16) f.template operator()<true, kWide16, 16>(i);
    for (; i + 16 <= n; i += 16) f.template operator()<true, 1, 16>(i);
  }
  if constexpr (kWide > 1)
    for (; i + 8 * kWide <= n; i += 8 * kWide) f.template operator()<true, kWide, 8>(i);
  for (; i + 8 <= n; i += 8) f.template operator()<true, 1, 8>(i);
  if (i < n) f.template operator()<false, 1, 8>(i);
}

// Slabs per pass for NP rows: the kernels keep NP x W sums (or rows) in registers, and a
// fused multiply-add takes 4 cycles on Zen 3 and 2 issue each cycle, so 8 independent sums
// keep the units busy; with 4 they ran at half rate. Sixteen registers hold at most 8 sums
// plus the streamed vector and a broadcast.
template <int NP>
constexpr int kWideFor = NP <= 4 ? 2 : 1;
// The AVX-512 build's 16-float slabs: 32 registers hold NP x W sums, W streamed vectors and
// a broadcast. Each broadcast (a row's weight p[a][j]) then feeds W vectors of 16 outputs:
// with 8 rows, 32 outputs per broadcast, where the eight-float code has 8.
template <int NP>
constexpr int kWide16For = NP <= 4 ? 4 : 2;

template <int NP, int L>
void weighted_rows_n(const float* const P[kTileRows], const float* R, int64_t ldr, int64_t nk, int64_t n, float scale,
                     float* const Out[kTileRows], bool accumulate) {
  const float* p[NP];
  float* out[NP];
  for (int a = 0; a < NP; ++a) {
    p[a] = P[a];
    out[a] = Out[a];
  }
  for_slabs<kWideFor<NP>, kWide16For<NP>, L>(n, [&]<bool kFull, int W, int SL>(int64_t i) {
    const Slab<kFull, SL> s(i, n);
    Vec<SL> acc[W][NP] = {};
    const float* r = R + i;
    for (int64_t j = 0; j < nk; ++j, r += ldr)
      for (int w = 0; w < W; ++w) {
        const Vec<SL> rj = s.load(r + SL * w);
        for (int a = 0; a < NP; ++a) acc[w][a] += p[a][j] * rj;
      }
    for (int w = 0; w < W; ++w)
      for (int a = 0; a < NP; ++a) {
        float* o = out[a] + i + SL * w;
        s.store(o, accumulate ? s.load(o) + scale * acc[w][a] : scale * acc[w][a]);
      }
  });
}

template <int NP, int L>
void add_outer_n(const float* const P[kTileRows], const float* const X[kTileRows], int64_t nk, int64_t n, float scale,
                 float* Y, int64_t ldy) {
  const float* p[NP];
  for (int a = 0; a < NP; ++a) p[a] = P[a];
  for_slabs<kWideFor<NP>, kWide16For<NP>, L>(n, [&]<bool kFull, int W, int SL>(int64_t i) {
    const Slab<kFull, SL> s(i, n);
    Vec<SL> x[W][NP];
    for (int w = 0; w < W; ++w)
      for (int a = 0; a < NP; ++a) x[w][a] = s.load(X[a] + i + SL * w);
    float* y = Y + i;
    for (int64_t j = 0; j < nk; ++j, y += ldy)
      for (int w = 0; w < W; ++w) {  // y_j += scale · Σ_a p_aj x_a
        Vec<SL> sum = p[0][j] * x[w][0];
        for (int a = 1; a < NP; ++a) sum += p[a][j] * x[w][a];
        s.store(y + SL * w, s.load(y + SL * w) + scale * sum);
      }
  });
}

template <int NP, int L>
void weighted_cols_n(const float* P, int64_t ldp, const float* X, int64_t ldx, int64_t nt, int64_t n, float scale,
                     float* Y, int64_t ldy) {
  for_slabs<kWideFor<NP>, kWide16For<NP>, L>(n, [&]<bool kFull, int W, int SL>(int64_t i) {
    const Slab<kFull, SL> s(i, n);
    Vec<SL> acc[W][NP] = {};
    const float* x = X + i;
    const float* p = P;
    for (int64_t t = 0; t < nt; ++t, x += ldx, p += ldp)
      for (int w = 0; w < W; ++w) {
        const Vec<SL> xt = s.load(x + SL * w);
        for (int a = 0; a < NP; ++a) acc[w][a] += p[a] * xt;
      }
    for (int w = 0; w < W; ++w)
      for (int a = 0; a < NP; ++a) {
        float* y = Y + a * ldy + i + SL * w;
        s.store(y, s.load(y) + scale * acc[w][a]);
      }
  });
}

// Calls f.template operator()<N>() for N = n (1 .. kTileRows): the row count becomes a
// constant, so the per-row sums are registers.
template <class F>
void with_rows(int n, F&& f) {
  static_assert(kTileRows == 8);
  switch (n) {
    case 1: return f.template operator()<1>();
    case 2: return f.template operator()<2>();
    case 3: return f.template operator()<3>();
    case 4: return f.template operator()<4>();
    case 5: return f.template operator()<5>();
    case 6: return f.template operator()<6>();
    case 7: return f.template operator()<7>();
    default: return f.template operator()<8>();
  }
}

// kTail: n is not a multiple of 8. (A separate instantiation: with the partial loads'
// memcpy in the same code, GCC kept the sums in memory and zeroed them with a `rep stos`.)
template <bool kTail>
void dots_n(const float* const X[kTileRows], int nx, const float* K, int64_t ldk, int64_t nk, int64_t n, float scale,
          float* S, int64_t lds) {
  const int64_t n8 = n / 8 * 8;
  const Slab<false> tail(n8, n);
  for (int64_t j0 = 0; j0 < nk; j0 += 4) {
    const int64_t nj = std::min<int64_t>(4, nk - j0);
    const float* k[4];
    for (int64_t b = 0; b < 4; ++b) k[b] = K + (j0 + std::min(b, nj - 1)) * ldk;  // past nk: repeated, not stored
    for (int a = 0; a < nx; a += 2) {  // two rows by four keys: eight sums in registers
      const float* x0 = X[a];
      const float* x1 = a + 1 < nx ? X[a + 1] : x0;
      f8 acc[2][4] = {};
      for (int64_t i = 0; i < n8; i += 8) {
        const f8 xa = load8(x0 + i), xb = load8(x1 + i);
        for (int b = 0; b < 4; ++b) {
          const f8 kb = load8(k[b] + i);
          acc[0][b] += xa * kb;
          acc[1][b] += xb * kb;
        }
      }
      if constexpr (kTail) {
        const f8 xa = tail.load(x0 + n8), xb = tail.load(x1 + n8);
        for (int b = 0; b < 4; ++b) {
          const f8 kb = tail.load(k[b] + n8);
          acc[0][b] += xa * kb;
          acc[1][b] += xb * kb;
        }
      }
      // (Both rows' sums are made before the second row is known to be real: indexing acc by
      // a run-time row kept it in memory, zeroed by a `rep stos` on every tile.)
      f4 row[2];
      for (int r = 0; r < 2; ++r)
        row[r] = vec4::splat(scale) *
                 lane_sums(halves_sum(acc[r][0]), halves_sum(acc[r][1]), halves_sum(acc[r][2]), halves_sum(acc[r][3]));
      store_n(S + a * lds + j0, row[0], nj);
      if (a + 1 < nx) store_n(S + (a + 1) * lds + j0, row[1], nj);
    }
  }
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
// dots_n for the AVX-512 build: four rows by four keys, keys paired in 16-float registers
// (key b in lanes 0-7, key b+1 in lanes 8-15) against each row's eight floats broadcast to
// both halves. Each half is dots_n's eight-float sum of its row and key, the same fused
// multiply-adds in the same order, so the results are dots_n's bits, with one 512-bit
// multiply-add for two of dots_n's. (The row's broadcast is a load; pairing the keys
// instead of the rows takes two inserts per 8 multiply-adds, not six shuffles.) Rows past
// nx repeat an earlier one, as in dots_n, and are not stored. Built for x86-64-v4 only: it
// runs under dots_wide, where the CPU has AVX-512.
#define NL_V4 __attribute__((target("arch=x86-64-v4")))
// (The masked broadcast with every lane selected: the plain intrinsic passes an undefined
// vector that GCC 12 warns about, -Wmaybe-uninitialized; the code is the same.)
NL_V4 inline f16v both_halves(f8 v) { return _mm512_maskz_broadcast_f32x8(0xFFFF, v); }
NL_V4 inline f16v halves(f8 lo, f8 hi) { return _mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1); }
NL_V4 inline f16v fma16(f16v a, f16v b, f16v c) { return _mm512_fmadd_ps(a, b, c); }
template <bool kTail>
NL_V4 void dots_wide_n(const float* const X[kTileRows], int nx, const float* K,
                                                             int64_t ldk, int64_t nk, int64_t n, float scale, float* S,
                                                             int64_t lds) {
  const int64_t n8 = n / 8 * 8;
  const Slab<false> tail(n8, n);
  const auto low = [](f16v v) -> f8 { return __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7); };
  const auto high = [](f16v v) -> f8 { return __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15); };
  for (int64_t j0 = 0; j0 < nk; j0 += 4) {
    const int64_t nj = std::min<int64_t>(4, nk - j0);
    const float* k[4];
    for (int64_t b = 0; b < 4; ++b) k[b] = K + (j0 + std::min(b, nj - 1)) * ldk;  // past nk: repeated, not stored
    for (int a = 0; a < nx; a += 4) {  // four rows by two key pairs: eight sums in registers
      const float* x[4];
      for (int r = 0; r < 4; ++r) x[r] = a + r < nx ? X[a + r] : X[a];
      f16v acc[4][2] = {};
      for (int64_t i = 0; i < n8; i += 8) {
        const f16v k01 = halves(load8(k[0] + i), load8(k[1] + i)), k23 = halves(load8(k[2] + i), load8(k[3] + i));
        for (int r = 0; r < 4; ++r) {
          const f16v xr = both_halves(load8(x[r] + i));
          acc[r][0] = fma16(xr, k01, acc[r][0]);
          acc[r][1] = fma16(xr, k23, acc[r][1]);
        }
      }
      if constexpr (kTail) {
        const f16v k01 = halves(tail.load(k[0] + n8), tail.load(k[1] + n8));
        const f16v k23 = halves(tail.load(k[2] + n8), tail.load(k[3] + n8));
        for (int r = 0; r < 4; ++r) {
          const f16v xr = both_halves(tail.load(x[r] + n8));
          acc[r][0] = fma16(xr, k01, acc[r][0]);
          acc[r][1] = fma16(xr, k23, acc[r][1]);
        }
      }
      for (int r = 0; r < 4; ++r) {
        const f4 row = vec4::splat(scale) * lane_sums(halves_sum(low(acc[r][0])), halves_sum(high(acc[r][0])),
                                                      halves_sum(low(acc[r][1])), halves_sum(high(acc[r][1])));
        if (a + r < nx) store_n(S + (a + r) * lds + j0, row, nj);
      }
    }
  }
}
#endif

// The three column-wise products for slabs of L floats (8, or 16 in the AVX-512 build).
template <int L>
void weighted_rows_by(const float* const P[kTileRows], int np, const float* R, int64_t ldr, int64_t nk, int64_t n,
                      float scale, float* const Out[kTileRows], bool accumulate) {
  with_rows(np, [&]<int N>() { weighted_rows_n<N, L>(P, R, ldr, nk, n, scale, Out, accumulate); });
}
template <int L>
void add_outer_by(const float* const P[kTileRows], int np, const float* const X[kTileRows], int64_t nk, int64_t n,
                  float scale, float* Y, int64_t ldy) {
  with_rows(np, [&]<int N>() { add_outer_n<N, L>(P, X, nk, n, scale, Y, ldy); });
}
template <int L>
void weighted_cols_by(const float* P, int64_t ldp, int np, const float* X, int64_t ldx, int64_t nt, int64_t n,
                      float scale, float* Y, int64_t ldy) {
  with_rows(np, [&]<int N>() { weighted_cols_n<N, L>(P, ldp, X, ldx, nt, n, scale, Y, ldy); });
}

std::atomic<bool> wide_turned_off{false};

}  // namespace

// The AVX-512 build of the column-wise products (16-float slabs), x86-64 with GCC as
// NL_HOST_KERNEL: built for x86-64-v4 (AVX-512 F/BW/CD/DQ/VL) and called where the CPU and
// the OS have it. The attention tiles and the LoRA branch's products stream rows past up
// to 8 row weights broadcast one at a time: with eight-float slabs each broadcast fed one
// fused multiply-add of 8 outputs, with 16-float slabs two or four of 16. Measured on Zen 5
// (docs/performance/roofline-2026-12-06-zen5-host.md, same binary, both builds alternating):
// LoRA up and input gradient 1.8-2.2x faster, down (dots) 1.5x, attention 1.2-3x (noisy);
// in the training step's CPU samples, 0.67-0.69x the time (against the unchanged code's).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define NL_TILE_WIDE 1
#define NL_WIDE_KERNEL __attribute__((target("arch=x86-64-v4"), flatten, noinline))
namespace {
NL_WIDE_KERNEL
void dots_wide(const float* const X[kTileRows], int nx, const float* K, int64_t ldk, int64_t nk, int64_t n, float scale,
               float* S, int64_t lds) {
  if (n % 8 != 0) return dots_wide_n<true>(X, nx, K, ldk, nk, n, scale, S, lds);
  dots_wide_n<false>(X, nx, K, ldk, nk, n, scale, S, lds);
}
NL_WIDE_KERNEL
void weighted_rows_wide(const float* const P[kTileRows], int np, const float* R, int64_t ldr, int64_t nk, int64_t n,
                        float scale, float* const Out[kTileRows], bool accumulate) {
  weighted_rows_by<16>(P, np, R, ldr, nk, n, scale, Out, accumulate);
}
NL_WIDE_KERNEL
void add_outer_wide(const float* const P[kTileRows], int np, const float* const X[kTileRows], int64_t nk, int64_t n,
                    float scale, float* Y, int64_t ldy) {
  add_outer_by<16>(P, np, X, nk, n, scale, Y, ldy);
}
NL_WIDE_KERNEL
void weighted_cols_wide(const float* P, int64_t ldp, int np, const float* X, int64_t ldx, int64_t nt, int64_t n,
                        float scale, float* Y, int64_t ldy) {
  weighted_cols_by<16>(P, ldp, np, X, ldx, nt, n, scale, Y, ldy);
}
}  // namespace
#else
#define NL_TILE_WIDE 0
#endif

bool wide_vectors_available() {
#if NL_TILE_WIDE
  static const bool has = [] {
    __builtin_cpu_init();  // (may run before the constructors that would initialize it)
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512vl");
  }();
  return has;
#else
  return false;
#endif
}

bool wide_vectors() { return wide_vectors_available() && !wide_turned_off.load(std::memory_order_relaxed); }

void turn_wide_vectors_off(bool off) { wide_turned_off.store(off, std::memory_order_relaxed); }

NL_HOST_KERNEL
void dots(const float* const X[kTileRows], int nx, const float* K, int64_t ldk, int64_t nk, int64_t n, float scale,
          float* S, int64_t lds) {
#if NL_TILE_WIDE
  if (nx > 2 && wide_vectors()) return dots_wide(X, nx, K, ldk, nk, n, scale, S, lds);
#endif
  if (n % 8 != 0) return dots_n<true>(X, nx, K, ldk, nk, n, scale, S, lds);
  dots_n<false>(X, nx, K, ldk, nk, n, scale, S, lds);
}

NL_HOST_KERNEL
void weighted_rows(const float* const P[kTileRows], int np, const float* R, int64_t ldr, int64_t nk, int64_t n,
                   float scale, float* const Out[kTileRows], bool accumulate) {
#if NL_TILE_WIDE
  if (n >= 16 && wide_vectors()) return weighted_rows_wide(P, np, R, ldr, nk, n, scale, Out, accumulate);
#endif
  weighted_rows_by<8>(P, np, R, ldr, nk, n, scale, Out, accumulate);
}

NL_HOST_KERNEL
void add_outer(const float* const P[kTileRows], int np, const float* const X[kTileRows], int64_t nk, int64_t n,
               float scale, float* Y, int64_t ldy) {
#if NL_TILE_WIDE
  if (n >= 16 && wide_vectors()) return add_outer_wide(P, np, X, nk, n, scale, Y, ldy);
#endif
  add_outer_by<8>(P, np, X, nk, n, scale, Y, ldy);
}

NL_HOST_KERNEL
void weighted_cols(const float* P, int64_t ldp, int np, const float* X, int64_t ldx, int64_t nt, int64_t n,
                   float scale, float* Y, int64_t ldy) {
#if NL_TILE_WIDE
  if (n >= 16 && wide_vectors()) return weighted_cols_wide(P, ldp, np, X, ldx, nt, n, scale, Y, ldy);
#endif
  weighted_cols_by<8>(P, ldp, np, X, ldx, nt, n, scale, Y, ldy);
}

}  // namespace nl::tile
