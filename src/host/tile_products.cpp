#include "tile_products.h"

#include <algorithm>
#include <cstring>

#include "vec4.h"

namespace nl::tile {
namespace {

using vec4::f4;
using vec4::store_n;

// The lane sums of a, b, c, d as the four lanes of one vector.
f4 lane_sums(f4 a, f4 b, f4 c, f4 d) {
  using vec4::i4;
  const f4 ab = __builtin_shuffle(a, b, i4{0, 4, 1, 5}) + __builtin_shuffle(a, b, i4{2, 6, 3, 7});
  const f4 cd = __builtin_shuffle(c, d, i4{0, 4, 1, 5}) + __builtin_shuffle(c, d, i4{2, 6, 3, 7});
  return __builtin_shuffle(ab, cd, i4{0, 1, 4, 5}) + __builtin_shuffle(ab, cd, i4{2, 3, 6, 7});
}

// Eight floats: one AVX register in the x86-64-v3 build (NL_HOST_KERNEL), two SSE or NEON
// registers elsewhere, with the same arithmetic in every lane either way. (Written as two
// four-float vectors, the x86-64-v3 build stayed on 128-bit registers.) Scalars multiply
// vectors directly (GCC broadcasts them): a vector built from 8 copies compiled to 8 inserts.
// (GCC warns that returning one changes the ABI without AVX: every function taking or
// returning one here is inlined into the kernels, so no call passes one.)
#pragma GCC diagnostic ignored "-Wpsabi"
using f8 = float __attribute__((vector_size(32)));
using f8u = float __attribute__((vector_size(32), aligned(4)));
inline f8 load8(const float* p) { return *reinterpret_cast<const f8u*>(p); }
// Lanes 0..3 plus lanes 4..7.
inline f4 halves_sum(f8 v) {
  return __builtin_shufflevector(v, v, 0, 1, 2, 3) + __builtin_shufflevector(v, v, 4, 5, 6, 7);
}

// Columns [i, i+8) of a row as one vector. Full slabs (kFull) move whole vectors; the last,
// partial slab of a row has n real lanes, the others zero. The loops below run every full
// slab first and the partial one after, so no branch sits in their inner loops.
template <bool kFull>
struct Slab {
  int64_t n = 8;
  Slab(int64_t i, int64_t cols) {
    if constexpr (!kFull) n = std::min<int64_t>(8, cols - i);
  }
  f8 load(const float* p) const {
    if constexpr (kFull) {
      return load8(p);
    } else {
      f8 v = {};
      std::memcpy(&v, p, static_cast<size_t>(n) * sizeof(float));
      return v;
    }
  }
  void store(float* p, f8 v) const {
    if constexpr (kFull)
      *reinterpret_cast<f8u*>(p) = v;
    else
      std::memcpy(p, &v, static_cast<size_t>(n) * sizeof(float));
  }
};

// Calls f.template operator()<kFull>(i) for every 8-column slab i of [0, n).
template <class F>
void for_slabs(int64_t n, F&& f) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) f.template operator()<true>(i);
  if (i < n) f.template operator()<false>(i);
}

template <int NP>
void weighted_rows_n(const float* const P[kTileRows], const float* R, int64_t ldr, int64_t nk, int64_t n, float scale,
                     float* const Out[kTileRows], bool accumulate) {
  const float* p[NP];
  float* out[NP];
  for (int a = 0; a < NP; ++a) {
    p[a] = P[a];
    out[a] = Out[a];
  }
  for_slabs(n, [&]<bool kFull>(int64_t i) {
    const Slab<kFull> s(i, n);
    f8 acc[NP] = {};
    const float* r = R + i;
    for (int64_t j = 0; j < nk; ++j, r += ldr) {
      const f8 rj = s.load(r);
      for (int a = 0; a < NP; ++a) acc[a] += p[a][j] * rj;
    }
    for (int a = 0; a < NP; ++a) {
      f8 o = scale * acc[a];
      if (accumulate) o += s.load(out[a] + i);
      s.store(out[a] + i, o);
    }
  });
}

template <int NP>
void add_outer_n(const float* const P[kTileRows], const float* const X[kTileRows], int64_t nk, int64_t n, float scale,
                 float* Y, int64_t ldy) {
  const float* p[NP];
  for (int a = 0; a < NP; ++a) p[a] = P[a];
  for_slabs(n, [&]<bool kFull>(int64_t i) {
    const Slab<kFull> s(i, n);
    f8 x[NP];
    for (int a = 0; a < NP; ++a) x[a] = s.load(X[a] + i);
    float* y = Y + i;
    for (int64_t j = 0; j < nk; ++j, y += ldy) {
      f8 yj = s.load(y);
      for (int a = 0; a < NP; ++a) yj += (scale * p[a][j]) * x[a];
      s.store(y, yj);
    }
  });
}

template <int NP>
void weighted_cols_n(const float* P, int64_t ldp, const float* X, int64_t ldx, int64_t nt, int64_t n, float scale,
                     float* Y, int64_t ldy) {
  for_slabs(n, [&]<bool kFull>(int64_t i) {
    const Slab<kFull> s(i, n);
    f8 acc[NP] = {};
    const float* x = X + i;
    const float* p = P;
    for (int64_t t = 0; t < nt; ++t, x += ldx, p += ldp) {
      const f8 xt = s.load(x);
      for (int a = 0; a < NP; ++a) acc[a] += p[a] * xt;
    }
    for (int a = 0; a < NP; ++a) s.store(Y + a * ldy + i, s.load(Y + a * ldy + i) + scale * acc[a]);
  });
}

// Calls f.template operator()<N>() for N = n (1 .. kTileRows): the row count becomes a
// constant, so the per-row accumulators are registers.
template <class F>
void with_rows(int n, F&& f) {
  switch (n) {
    case 1: return f.template operator()<1>();
    case 2: return f.template operator()<2>();
    case 3: return f.template operator()<3>();
    default: return f.template operator()<4>();
  }
}

}  // namespace

NL_HOST_KERNEL
void dots(const float* const X[kTileRows], int nx, const float* K, int64_t ldk, int64_t nk, int64_t n, float scale,
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
      auto step = [&](f8 xa, f8 xb, auto load_k) {
        for (int b = 0; b < 4; ++b) {
          const f8 kb = load_k(k[b]);
          acc[0][b] += xa * kb;
          acc[1][b] += xb * kb;
        }
      };
      for (int64_t i = 0; i < n8; i += 8)
        step(load8(x0 + i), load8(x1 + i), [i](const float* r) { return load8(r + i); });
      if (n8 < n)
        step(tail.load(x0 + n8), tail.load(x1 + n8), [&](const float* r) { return tail.load(r + n8); });
      for (int r = 0; r < 2 && a + r < nx; ++r)
        store_n(S + (a + r) * lds + j0,
                vec4::splat(scale) * lane_sums(halves_sum(acc[r][0]), halves_sum(acc[r][1]), halves_sum(acc[r][2]),
                                               halves_sum(acc[r][3])),
                nj);
    }
  }
}

NL_HOST_KERNEL
void weighted_rows(const float* const P[kTileRows], int np, const float* R, int64_t ldr, int64_t nk, int64_t n,
                   float scale, float* const Out[kTileRows], bool accumulate) {
  with_rows(np, [&]<int N>() { weighted_rows_n<N>(P, R, ldr, nk, n, scale, Out, accumulate); });
}

NL_HOST_KERNEL
void add_outer(const float* const P[kTileRows], int np, const float* const X[kTileRows], int64_t nk, int64_t n,
               float scale, float* Y, int64_t ldy) {
  with_rows(np, [&]<int N>() { add_outer_n<N>(P, X, nk, n, scale, Y, ldy); });
}

NL_HOST_KERNEL
void weighted_cols(const float* P, int64_t ldp, int np, const float* X, int64_t ldx, int64_t nt, int64_t n,
                   float scale, float* Y, int64_t ldy) {
  with_rows(np, [&]<int N>() { weighted_cols_n<N>(P, ldp, X, ldx, nt, n, scale, Y, ldy); });
}

}  // namespace nl::tile
