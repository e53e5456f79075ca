// The vectorized host ops against plain double-precision references: vec4's exponential,
// the tile products, attention (forward and backward, packed sequences, grouped heads, head
// sizes that are not a multiple of the vector width), the loss, SwiGLU and the LoRA branch
// (with and without dropout). Each is also run with 1 and 3 threads: results must be
// bit-identical (tasks own their outputs and sum in a fixed order).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cmath>
#include <limits>
#include <vector>

#include "../../src/host/ops.h"
#include "../../src/host/tile_products.h"
#include "../../src/host/vec4.h"
#include "nightlora/util/error.h"
#include "test_util.h"

namespace nl {
namespace {

using Vec = std::vector<float>;
using nltest::random_vec;

void expect_close(const Vec& got, const std::vector<double>& want, double tol, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], tol * (1.0 + std::fabs(want[i]))) << what << " [" << i << "]";
}

TEST(Vec4Exp, WithinTwoUlpOverTheRangeAndExactAtTheEdges) {
  for (float x = -87.3f; x < 88.37f; x += 0.00731f) {
    const float got = vec4::exp(vec4::splat(x))[0];
    const double want = std::exp(static_cast<double>(x));
    const double ulp = std::nextafter(static_cast<float>(want), INFINITY) - static_cast<float>(want);
    ASSERT_LE(std::fabs(got - want), 2 * ulp) << "x = " << x;
  }
  const vec4::f4 edge = vec4::exp(vec4::f4{-1000.0f, 1000.0f, -INFINITY, 0.0f});
  EXPECT_EQ(edge[0], 0.0f);
  EXPECT_EQ(edge[1], INFINITY);
  EXPECT_EQ(edge[2], 0.0f);
  EXPECT_EQ(edge[3], 1.0f);
  EXPECT_TRUE(std::isnan(vec4::exp(vec4::splat(NAN))[0]));
  // The eight-float exponential (the loss, SwiGLU) is the same arithmetic lane by lane.
  const vec4::f8 x8 = {-1000.0f, -87.0f, -3.25f, -0.0f, 0.5f, 17.0f, 88.0f, NAN};
  const vec4::f8 e8 = vec4::exp(x8);
  for (int l = 0; l < 8; ++l) {
    const float e4 = vec4::exp(vec4::splat(x8[l]))[0];
    if (std::isnan(x8[l]))
      EXPECT_TRUE(std::isnan(e8[l]));
    else
      EXPECT_EQ(e8[l], e4) << "x = " << x8[l];
  }
}

TEST(TileProducts, MatchTheDefinitionForEveryRowCountAndRaggedLength) {
  for (int rows = 1; rows <= tile::kTileRows; ++rows)
    for (int64_t n : {1, 3, 4, 7, 8, 13, 16, 29, 40, 64}) {
      const int64_t nk = 9;
      const Vec X = random_vec(rows * n, 1, 1.0f), K = random_vec(nk * n, 2, 1.0f), P = random_vec(rows * nk, 3, 1.0f);
      const float* xr[tile::kTileRows];
      const float* pr[tile::kTileRows];
      for (int a = 0; a < rows; ++a) xr[a] = X.data() + a * n, pr[a] = P.data() + a * nk;
      // dots: S[a][j] = 0.5 x_a·k_j
      Vec S(static_cast<size_t>(rows * nk));
      tile::dots(xr, rows, K.data(), n, nk, n, 0.5f, S.data(), nk);
      std::vector<double> want(S.size());
      for (int a = 0; a < rows; ++a)
        for (int64_t j = 0; j < nk; ++j) {
          double s = 0;
          for (int64_t i = 0; i < n; ++i) s += double(X[a * n + i]) * K[j * n + i];
          want[a * nk + j] = 0.5 * s;
        }
      expect_close(S, want, 1e-5, "dots");
      // weighted_rows: out_a (+)= 2 Σ_j p_aj k_j
      Vec O = random_vec(rows * n, 4, 1.0f);
      const Vec O0 = O;
      float* orows[tile::kTileRows];
      for (int a = 0; a < rows; ++a) orows[a] = O.data() + a * n;
      tile::weighted_rows(pr, rows, K.data(), n, nk, n, 2.0f, orows, true);
      want.assign(O.size(), 0.0);
      for (int a = 0; a < rows; ++a)
        for (int64_t i = 0; i < n; ++i) {
          double s = 0;
          for (int64_t j = 0; j < nk; ++j) s += double(P[a * nk + j]) * K[j * n + i];
          want[a * n + i] = O0[a * n + i] + 2 * s;
        }
      expect_close(O, want, 1e-5, "weighted_rows");
      // add_outer: y_j += 3 Σ_a p_aj x_a
      Vec Y = random_vec(nk * n, 5, 1.0f);
      const Vec Y0 = Y;
      tile::add_outer(pr, rows, xr, nk, n, 3.0f, Y.data(), n);
      want.assign(Y.size(), 0.0);
      for (int64_t j = 0; j < nk; ++j)
        for (int64_t i = 0; i < n; ++i) {
          double s = 0;
          for (int a = 0; a < rows; ++a) s += double(P[a * nk + j]) * X[a * n + i];
          want[j * n + i] = Y0[j * n + i] + 3 * s;
        }
      expect_close(Y, want, 1e-5, "add_outer");
      // weighted_cols: y_a += 0.5 Σ_j P[j, a] k_j, P (nk x rows) read down its columns
      Vec C = random_vec(rows * n, 6, 1.0f);
      const Vec C0 = C;
      const Vec PT = random_vec(nk * rows, 7, 1.0f);
      tile::weighted_cols(PT.data(), rows, rows, K.data(), n, nk, n, 0.5f, C.data(), n);
      want.assign(C.size(), 0.0);
      for (int a = 0; a < rows; ++a)
        for (int64_t i = 0; i < n; ++i) {
          double s = 0;
          for (int64_t j = 0; j < nk; ++j) s += double(PT[j * rows + a]) * K[j * n + i];
          want[a * n + i] = C0[a * n + i] + 0.5 * s;
        }
      expect_close(C, want, 1e-5, "weighted_cols");
    }
}

// The AVX-512 build of the tile products gives the eight-float build's bits: in
// weighted_rows, add_outer and weighted_cols (16-float slabs) every output is one lane's
// chain, whatever the lane; dots pairs two rows' eight-float sums in one register. Lengths
// that take every slab path: groups of 16-float slabs, single ones, a full 8-float slab, a
// partial one; strides wider than the rows; with and without accumulation.
TEST(TileProducts, WideVectorsGiveTheEightFloatBits) {
  if (!tile::wide_vectors_available()) GTEST_SKIP() << "this CPU (or build) has no AVX-512 tile products";
  struct Restore {
    ~Restore() { tile::turn_wide_vectors_off(false); }
  } restore;
  const auto same_bits = [](const Vec& a, const Vec& b, const char* what, int rows, int64_t n) {
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i)
      ASSERT_EQ(std::bit_cast<uint32_t>(a[i]), std::bit_cast<uint32_t>(b[i]))
          << what << ", rows " << rows << ", n " << n << " [" << i << "]";
  };
  for (int rows = 1; rows <= tile::kTileRows; ++rows)
    for (int64_t n : {8, 15, 16, 17, 24, 31, 32, 40, 48, 63, 64, 72, 100, 128, 136}) {
      const int64_t nk = 11, ld = n + 5;
      const Vec X = random_vec(rows * ld, 11, 1.0f), K = random_vec(nk * ld, 12, 1.0f),
                P = random_vec(rows * nk, 13, 1.0f), PT = random_vec(nk * rows, 14, 1.0f);
      const Vec O0 = random_vec(rows * ld, 15, 1.0f), Y0 = random_vec(nk * ld, 16, 1.0f);
      const float* xr[tile::kTileRows];
      const float* pr[tile::kTileRows];
      for (int a = 0; a < rows; ++a) xr[a] = X.data() + a * ld, pr[a] = P.data() + a * nk;
      Vec got[2][5];
      for (int narrow = 0; narrow < 2; ++narrow) {
        tile::turn_wide_vectors_off(narrow == 1);
        EXPECT_EQ(tile::wide_vectors(), narrow == 0);
        Vec* out = got[narrow];
        for (int acc = 0; acc < 2; ++acc) {
          out[acc] = O0;
          float* orows[tile::kTileRows];
          for (int a = 0; a < rows; ++a) orows[a] = out[acc].data() + a * ld;
          tile::weighted_rows(pr, rows, K.data(), ld, nk, n, 0.75f, orows, acc == 1);
        }
        out[2] = Y0;
        tile::add_outer(pr, rows, xr, nk, n, 1.5f, out[2].data(), ld);
        out[3] = O0;
        tile::weighted_cols(PT.data(), rows, rows, K.data(), ld, nk, n, 0.5f, out[3].data(), ld);
        out[4].assign(static_cast<size_t>(rows * (nk + 2)), -1.0f);
        tile::dots(xr, rows, K.data(), ld, nk, n, 0.25f, out[4].data(), nk + 2);
      }
      const char* names[5] = {"weighted_rows", "weighted_rows (accumulate)", "add_outer", "weighted_cols", "dots"};
      for (int k = 0; k < 5; ++k) same_bits(got[0][k], got[1][k], names[k], rows, n);
      // Past n (the stride's padding) nothing was written.
      for (int a = 0; a < rows; ++a)
        for (int64_t i = n; i < ld; ++i) ASSERT_EQ(got[0][0][a * ld + i], O0[a * ld + i]);
    }
}

// Attention by the definition, in double: full softmax rows within each sequence.
struct AttnRef {
  std::vector<double> out, lse, dq, dk, dv;
};
AttnRef reference_attention(const AttnShape& s, const Vec& q, const Vec& k, const Vec& v, const Vec& dout) {
  const int64_t hd = s.hd, qd = s.n_head * hd, kvd = s.n_kv * hd, group = s.n_head / s.n_kv;
  const double scale = 1.0 / std::sqrt(double(hd));
  AttnRef r{std::vector<double>(q.size()), std::vector<double>(s.T * s.n_head), std::vector<double>(q.size()),
            std::vector<double>(k.size()), std::vector<double>(v.size())};
  for (int64_t sq = 0; sq < s.n_seq; ++sq)
    for (int64_t h = 0; h < s.n_head; ++h) {
      const int64_t g = h / group, s0 = s.seq_start[sq], s1 = s.seq_start[sq + 1];
      for (int64_t t = s0; t < s1; ++t) {
        std::vector<double> p(static_cast<size_t>(t - s0 + 1));
        double m = -INFINITY, sum = 0;
        for (int64_t j = s0; j <= t; ++j) {
          double d = 0;
          for (int64_t i = 0; i < hd; ++i) d += double(q[t * qd + h * hd + i]) * k[j * kvd + g * hd + i];
          p[j - s0] = scale * d;
          m = std::max(m, p[j - s0]);
        }
        for (double& x : p) sum += (x = std::exp(x - m));
        for (double& x : p) x /= sum;
        r.lse[t * s.n_head + h] = m + std::log(sum);
        std::vector<double> dp(p.size());
        double D = 0;
        for (int64_t j = s0; j <= t; ++j)
          for (int64_t i = 0; i < hd; ++i) {
            r.out[t * qd + h * hd + i] += p[j - s0] * v[j * kvd + g * hd + i];
            dp[j - s0] += double(dout[t * qd + h * hd + i]) * v[j * kvd + g * hd + i];
          }
        for (int64_t j = s0; j <= t; ++j) D += p[j - s0] * dp[j - s0];
        for (int64_t j = s0; j <= t; ++j) {
          const double ds = p[j - s0] * (dp[j - s0] - D) * scale;
          for (int64_t i = 0; i < hd; ++i) {
            r.dq[t * qd + h * hd + i] += ds * k[j * kvd + g * hd + i];
            r.dk[j * kvd + g * hd + i] += ds * q[t * qd + h * hd + i];
            r.dv[j * kvd + g * hd + i] += p[j - s0] * dout[t * qd + h * hd + i];
          }
        }
      }
    }
  return r;
}

TEST(Attention, TilesMatchTheDefinitionOnPackedSequencesAndGroupedHeads) {
  for (int64_t hd : {8, 12, 64}) {
    const std::vector<int64_t> starts{0, 5, 16, 17, 30};  // lengths 5, 11, 1, 13
    AttnShape s{30, 4, 2, hd, starts.data(), 4};
    const int64_t qd = s.n_head * hd, kvd = s.n_kv * hd;
    const Vec q = random_vec(s.T * qd, 11, 1.0f), k = random_vec(s.T * kvd, 12, 1.0f),
              v = random_vec(s.T * kvd, 13, 1.0f), dout = random_vec(s.T * qd, 14, 1.0f);
    const AttnRef want = reference_attention(s, q, k, v, dout);
    Vec first[5];
    for (int threads : {1, 3}) {
      ThreadPool pool(threads);
      Vec scratch(static_cast<size_t>(attn_scratch_floats(s.n_head, s.T, s.hd)));
      s.scratch = scratch.data();
      Vec out(q.size()), lse(static_cast<size_t>(s.T * s.n_head)), dq(q.size()), dk(k.size()), dv(v.size());
      attention_forward(s, q.data(), k.data(), v.data(), out.data(), lse.data(), pool);
      attention_backward(s, dout.data(), q.data(), k.data(), v.data(), out.data(), lse.data(), dq.data(), dk.data(),
                         dv.data(), pool);
      expect_close(out, want.out, 1e-5, "out");
      expect_close(lse, want.lse, 1e-5, "lse");
      expect_close(dq, want.dq, 1e-5, "dq");
      expect_close(dk, want.dk, 1e-5, "dk");
      expect_close(dv, want.dv, 1e-5, "dv");
      const Vec got[5] = {out, lse, dq, dk, dv};
      for (int i = 0; i < 5; ++i) {
        if (threads == 1) first[i] = got[i];
        else EXPECT_EQ(got[i], first[i]) << "thread count changed output " << i << " (head size " << hd << ")";
      }
    }
  }
}

// Only each sequence's last rows asking (q_start: a shared prefix's keys and values given,
// its queries not): those rows get the bits of the run where every row asks, whatever their
// offset from the query block grid.
TEST(Attention, LastRowsOnlyGiveTheBitsOfTheFullRun) {
  for (int64_t hd : {8, 12, 64}) {
    const std::vector<int64_t> starts{0, 21, 40, 41, 70};  // lengths 21, 19, 1, 29
    const std::vector<int64_t> asking{3, 19, 1, 10};       // how many last rows ask, per sequence
    AttnShape s{70, 4, 2, hd, starts.data(), 4};
    const int64_t qd = s.n_head * hd, kvd = s.n_kv * hd;
    const Vec q = random_vec(s.T * qd, 21, 1.0f), k = random_vec(s.T * kvd, 22, 1.0f), v = random_vec(s.T * kvd, 23, 1.0f);
    Vec scratch(static_cast<size_t>(attn_scratch_floats(s.n_head, s.T, s.hd)));
    s.scratch = scratch.data();
    ThreadPool pool(2);
    Vec out(q.size()), lse(static_cast<size_t>(s.T * s.n_head));
    attention_forward(s, q.data(), k.data(), v.data(), out.data(), lse.data(), pool);
    // The asking rows' queries, packed.
    std::vector<int64_t> q_start{0}, rows;
    for (size_t i = 0; i < asking.size(); ++i) {
      for (int64_t t = starts[i + 1] - asking[i]; t < starts[i + 1]; ++t) rows.push_back(t);
      q_start.push_back(static_cast<int64_t>(rows.size()));
    }
    const int64_t R = static_cast<int64_t>(rows.size());
    Vec qr(static_cast<size_t>(R * qd)), outr(qr.size()), lser(static_cast<size_t>(R * s.n_head));
    for (int64_t r = 0; r < R; ++r) std::copy_n(q.begin() + rows[r] * qd, qd, qr.begin() + r * qd);
    AttnShape sr = s;
    sr.q_start = q_start.data();
    attention_forward(sr, qr.data(), k.data(), v.data(), outr.data(), lser.data(), pool);
    for (int64_t r = 0; r < R; ++r) {
      for (int64_t i = 0; i < qd; ++i)
        ASSERT_EQ(outr[r * qd + i], out[rows[r] * qd + i]) << "row " << rows[r] << ", head size " << hd;
      for (int64_t h = 0; h < s.n_head; ++h) ASSERT_EQ(lser[r * s.n_head + h], lse[rows[r] * s.n_head + h]);
    }
    Vec dummy(q.size());
    EXPECT_THROW(attention_backward(sr, qr.data(), qr.data(), k.data(), v.data(), outr.data(), lser.data(), dummy.data(),
                                    dummy.data(), dummy.data(), pool),
                 nl::Error);
  }
}

TEST(CrossEntropy, LossAndGradientMatchTheDefinition) {
  const int64_t C = 5, V = 1003;
  Vec logits = random_vec(C * V, 21, 8.0f);
  logits[2 * V + 7] = 60.0f;  // one row with a dominant logit
  const std::vector<int32_t> labels{0, 1002, 7, 500, 3};
  std::vector<double> want_grad(logits.size()), want_loss(C);
  for (int64_t r = 0; r < C; ++r) {
    double m = -INFINITY, sum = 0;
    for (int64_t i = 0; i < V; ++i) m = std::max(m, double(logits[r * V + i]));
    for (int64_t i = 0; i < V; ++i) sum += std::exp(logits[r * V + i] - m);
    want_loss[r] = m + std::log(sum) - logits[r * V + labels[r]];
    for (int64_t i = 0; i < V; ++i) want_grad[r * V + i] = 0.5 * std::exp(logits[r * V + i] - m) / sum;
    want_grad[r * V + labels[r]] -= 0.5;
  }
  ThreadPool pool(2);
  std::vector<double> loss(C);
  cross_entropy_chunk(logits.data(), labels.data(), C, V, 0.5f, loss.data(), pool);
  for (int64_t r = 0; r < C; ++r) EXPECT_NEAR(loss[r], want_loss[r], 1e-5 * (1 + want_loss[r])) << "row " << r;
  for (size_t i = 0; i < logits.size(); ++i) ASSERT_NEAR(logits[i], want_grad[i], 1e-6) << i;
}

// The AVX-512 build of the loss (exponentials 16 at a time, each 8-float half summed in
// turn) gives the 8-float build's bits, on rows of any length: runs of 256 with 16-float
// steps, an 8-float step left over, a partial vector.
TEST(CrossEntropy, WideVectorsGiveTheEightFloatBits) {
  if (!tile::wide_vectors_available()) GTEST_SKIP() << "this CPU (or build) has no AVX-512 host ops";
  struct Restore {
    ~Restore() { tile::turn_wide_vectors_off(false); }
  } restore;
  ThreadPool pool(2);
  for (int64_t V : {7, 8, 24, 256, 1003, 4104, 151936}) {
    const int64_t C = 3;
    const Vec logits0 = random_vec(C * V, 22, 12.0f);
    const std::vector<int32_t> labels{0, static_cast<int32_t>(V - 1), static_cast<int32_t>(V / 2)};
    Vec got[2];
    std::vector<double> loss[2];
    for (int narrow = 0; narrow < 2; ++narrow) {
      tile::turn_wide_vectors_off(narrow == 1);
      got[narrow] = logits0;
      loss[narrow].assign(C, 0.0);
      cross_entropy_chunk(got[narrow].data(), labels.data(), C, V, 0.25f, loss[narrow].data(), pool);
    }
    for (int64_t r = 0; r < C; ++r)
      ASSERT_EQ(std::bit_cast<uint64_t>(loss[0][r]), std::bit_cast<uint64_t>(loss[1][r])) << "V " << V << ", row " << r;
    for (size_t i = 0; i < got[0].size(); ++i)
      ASSERT_EQ(std::bit_cast<uint32_t>(got[0][i]), std::bit_cast<uint32_t>(got[1][i])) << "V " << V << " [" << i << "]";
  }
}

TEST(RmsNorm, ForwardAndBackwardMatchTheDefinitionForAnyThreadCount) {
  const int64_t rows = 70;  // two tasks of rows
  for (int64_t n : {5, 37, 896}) {
    const Vec x = random_vec(rows * n, 61, 3.0f), w = random_vec(n, 62, 1.5f), dy = random_vec(rows * n, 63, 1.0f);
    const float eps = 1e-6f;
    Vec results[2][2];
    for (int k = 0; k < 2; ++k) {
      ThreadPool pool(k == 0 ? 1 : 3);
      Vec y(rows * n), rstd(rows), dx(rows * n, 0.5f);  // dx accumulates
      rmsnorm_forward(x.data(), w.data(), rows, n, eps, y.data(), rstd.data(), pool);
      rmsnorm_backward(dy.data(), x.data(), w.data(), rstd.data(), rows, n, dx.data(), pool);
      std::vector<double> wy(rows * n), wdx(rows * n);
      for (int64_t r = 0; r < rows; ++r) {
        double ss = 0, dot = 0;
        for (int64_t i = 0; i < n; ++i) ss += double(x[r * n + i]) * x[r * n + i];
        const double rs = 1.0 / std::sqrt(ss / double(n) + eps);
        for (int64_t i = 0; i < n; ++i) dot += double(w[i]) * dy[r * n + i] * x[r * n + i];
        for (int64_t i = 0; i < n; ++i) {
          wy[r * n + i] = x[r * n + i] * rs * w[i];
          wdx[r * n + i] = 0.5 + rs * w[i] * dy[r * n + i] - x[r * n + i] * rs * rs * rs / double(n) * dot;
        }
      }
      expect_close(y, wy, 1e-5, "y");
      expect_close(dx, wdx, 1e-5, "dx");
      results[k][0] = y;
      results[k][1] = dx;
    }
    EXPECT_EQ(results[0][0], results[1][0]) << "n = " << n;
    EXPECT_EQ(results[0][1], results[1][1]) << "n = " << n;
  }
}

TEST(SwiGlu, ForwardAndBackwardMatchTheDefinition) {
  const int64_t n = 1031;  // not a multiple of 8
  Vec g = random_vec(n, 31, 6.0f), u = random_vec(n, 32, 2.0f), dh = random_vec(n, 33, 1.0f);
  g[0] = -100.0f, g[1] = 100.0f;  // saturated sigmoid
  ThreadPool pool(2);
  Vec h(n), dg(n, 0.25f), du(n, -0.5f);  // overwritten
  swiglu_forward(g.data(), u.data(), h.data(), n, pool);
  swiglu_backward(dh.data(), g.data(), u.data(), dg.data(), du.data(), n, pool);
  std::vector<double> wh(n), wdg(n), wdu(n);
  for (int64_t i = 0; i < n; ++i) {
    const double sg = 1.0 / (1.0 + std::exp(-double(g[i])));
    wh[i] = g[i] * sg * u[i];
    wdu[i] = double(dh[i]) * g[i] * sg;
    wdg[i] = double(dh[i]) * u[i] * sg * (1 + g[i] * (1 - sg));
  }
  expect_close(h, wh, 1e-5, "h");
  expect_close(dg, wdg, 1e-5, "dg");
  expect_close(du, wdu, 1e-5, "du");
}

TEST(LoraOps, EveryProductMatchesTheDefinitionWithAndWithoutDropout) {
  const int64_t T = 11, in = 37, out = 21, r = 3;
  const Vec A = random_vec(r * in, 41, 1.0f), B = random_vec(out * r, 42, 1.0f), x = random_vec(T * in, 43, 1.0f),
            dy = random_vec(T * out, 44, 1.0f);
  for (float dropout : {0.0f, 0.3f}) {
    const LoraBranch L{A.data(), B.data(), r, in, out, 2.0f, dropout, 77};
    Vec results[5];
    for (int threads : {1, 3}) {
      ThreadPool pool(threads);
      Vec u(T * in), z(T * r), y(T * out, 1.0f), dA(r * in, 0.5f), dB(out * r, 0.5f), dz(T * r), dx(T * in, 0.25f);
      lora_down(L, x.data(), T, z.data(), pool, u.data());
      lora_up_add(L, z.data(), T, y.data(), pool);
      lora_backward_params(L, x.data(), z.data(), dy.data(), T, dA.data(), dB.data(), u.data(), dz.data(), pool);
      lora_backward_input(L, dz.data(), T, dx.data(), pool);
      // The definition, with the mask read off u (with dropout u = mask ⊙ x, and x has no
      // zeros; without it u is not written).
      auto keep_of = [&](int64_t t, int64_t c) { return dropout > 0 ? double(u[t * in + c]) / x[t * in + c] : 1.0; };
      std::vector<double> wz(T * r), wy(T * out, 1.0), wdA(r * in, 0.5), wdB(out * r, 0.5), wdz(T * r), wdx(T * in, 0.25);
      for (int64_t t = 0; t < T; ++t) {
        for (int64_t c = 0; c < in; ++c) {
          const double keep = keep_of(t, c);
          ASSERT_TRUE(dropout > 0 ? (std::fabs(keep) < 1e-6 || std::fabs(keep - 1 / (1 - dropout)) < 1e-5)
                                  : keep == 1.0)
              << "mask at " << t << "," << c;
          for (int64_t j = 0; j < r; ++j) wz[t * r + j] += keep * x[t * in + c] * A[j * in + c];
        }
        for (int64_t o = 0; o < out; ++o)
          for (int64_t j = 0; j < r; ++j) {
            wy[t * out + o] += 2.0 * wz[t * r + j] * B[o * r + j];
            wdB[o * r + j] += 2.0 * dy[t * out + o] * wz[t * r + j];
            wdz[t * r + j] += 2.0 * dy[t * out + o] * B[o * r + j];
          }
      }
      for (int64_t t = 0; t < T; ++t)
        for (int64_t c = 0; c < in; ++c) {
          const double keep = keep_of(t, c);
          for (int64_t j = 0; j < r; ++j) {
            wdA[j * in + c] += wdz[t * r + j] * keep * x[t * in + c];
            wdx[t * in + c] += keep * wdz[t * r + j] * A[j * in + c];
          }
        }
      expect_close(z, wz, 1e-5, "z");
      expect_close(y, wy, 1e-5, "y");
      expect_close(dB, wdB, 1e-5, "dB");
      expect_close(dz, wdz, 1e-5, "dz");
      expect_close(dA, wdA, 1e-5, "dA");
      expect_close(dx, wdx, 1e-5, "dx");
      const Vec got[5] = {y, dA, dB, dz, dx};
      for (int i = 0; i < 5; ++i) {
        if (threads == 1) results[i] = got[i];
        else EXPECT_EQ(got[i], results[i]) << "thread count changed result " << i << " (dropout " << dropout << ")";
      }
    }
  }
}

}  // namespace
}  // namespace nl
