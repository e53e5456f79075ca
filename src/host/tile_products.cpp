#include "tile_products.h"

#include <algorithm>

#include "vec4.h"

namespace nl::tile {
namespace {

using vec4::f4;
using vec4::load_n;
using vec4::store_n;

// The lane sums of a, b, c, d as the four lanes of one vector.
f4 lane_sums(f4 a, f4 b, f4 c, f4 d) {
  using vec4::i4;
  const f4 ab = __builtin_shuffle(a, b, i4{0, 4, 1, 5}) + __builtin_shuffle(a, b, i4{2, 6, 3, 7});
  const f4 cd = __builtin_shuffle(c, d, i4{0, 4, 1, 5}) + __builtin_shuffle(c, d, i4{2, 6, 3, 7});
  return __builtin_shuffle(ab, cd, i4{0, 1, 4, 5}) + __builtin_shuffle(ab, cd, i4{2, 3, 6, 7});
}

// Columns [i, i+8) of a row as two vectors: n0 and n1 real lanes (n1 may be 0).
struct Slab {
  int64_t n0, n1;
  Slab(int64_t i, int64_t n) : n0(std::min<int64_t>(4, n - i)), n1(std::clamp<int64_t>(n - i - 4, 0, 4)) {}
  void load(const float* p, f4& a, f4& b) const {
    a = load_n(p, n0);
    b = n1 > 0 ? load_n(p + 4, n1) : f4{};
  }
  void store(float* p, f4 a, f4 b) const {
    store_n(p, a, n0);
    if (n1 > 0) store_n(p + 4, b, n1);
  }
};

template <int NP>
void weighted_rows_n(const float* const P[kTileRows], const float* R, int64_t ldr, int64_t nk, int64_t n, float scale,
                     float* const Out[kTileRows], bool accumulate) {
  for (int64_t i = 0; i < n; i += 8) {
    const Slab s(i, n);
    f4 acc[NP][2] = {};
    for (int64_t j = 0; j < nk; ++j) {
      f4 r0, r1;
      s.load(R + j * ldr + i, r0, r1);
      for (int a = 0; a < NP; ++a) {
        const f4 p = vec4::splat(P[a][j]);
        acc[a][0] += p * r0;
        acc[a][1] += p * r1;
      }
    }
    const f4 k = vec4::splat(scale);
    for (int a = 0; a < NP; ++a) {
      f4 o0 = k * acc[a][0], o1 = k * acc[a][1];
      if (accumulate) {
        f4 y0, y1;
        s.load(Out[a] + i, y0, y1);
        o0 += y0;
        o1 += y1;
      }
      s.store(Out[a] + i, o0, o1);
    }
  }
}

template <int NP>
void add_outer_n(const float* const P[kTileRows], const float* const X[kTileRows], int64_t nk, int64_t n, float scale,
                 float* Y, int64_t ldy) {
  for (int64_t i = 0; i < n; i += 8) {
    const Slab s(i, n);
    f4 x[NP][2];
    for (int a = 0; a < NP; ++a) s.load(X[a] + i, x[a][0], x[a][1]);
    for (int64_t j = 0; j < nk; ++j) {
      float* y = Y + j * ldy + i;
      f4 y0, y1;
      s.load(y, y0, y1);
      for (int a = 0; a < NP; ++a) {
        const f4 p = vec4::splat(scale * P[a][j]);
        y0 += p * x[a][0];
        y1 += p * x[a][1];
      }
      s.store(y, y0, y1);
    }
  }
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

void dots(const float* const X[kTileRows], int nx, const float* K, int64_t ldk, int64_t nk, int64_t n, float scale,
          float* S, int64_t lds) {
  for (int64_t j0 = 0; j0 < nk; j0 += 4) {
    const int64_t nj = std::min<int64_t>(4, nk - j0);
    const float* k[4];
    for (int64_t b = 0; b < 4; ++b) k[b] = K + (j0 + std::min(b, nj - 1)) * ldk;  // past nk: repeated, not stored
    for (int a = 0; a < nx; a += 2) {  // two rows by four keys: eight sums in registers
      const float* x0 = X[a];
      const float* x1 = a + 1 < nx ? X[a + 1] : x0;
      f4 acc[2][4] = {};
      for (int64_t i = 0; i < n; i += 4) {
        const f4 xa = load_n(x0 + i, n - i), xb = load_n(x1 + i, n - i);
        for (int b = 0; b < 4; ++b) {
          const f4 kb = load_n(k[b] + i, n - i);
          acc[0][b] += xa * kb;
          acc[1][b] += xb * kb;
        }
      }
      for (int r = 0; r < 2 && a + r < nx; ++r)
        store_n(S + (a + r) * lds + j0, vec4::splat(scale) * lane_sums(acc[r][0], acc[r][1], acc[r][2], acc[r][3]),
                nj);
    }
  }
}

void weighted_rows(const float* const P[kTileRows], int np, const float* R, int64_t ldr, int64_t nk, int64_t n,
                   float scale, float* const Out[kTileRows], bool accumulate) {
  with_rows(np, [&]<int N>() { weighted_rows_n<N>(P, R, ldr, nk, n, scale, Out, accumulate); });
}

void add_outer(const float* const P[kTileRows], int np, const float* const X[kTileRows], int64_t nk, int64_t n,
               float scale, float* Y, int64_t ldy) {
  with_rows(np, [&]<int N>() { add_outer_n<N>(P, X, nk, n, scale, Y, ldy); });
}

}  // namespace nl::tile
