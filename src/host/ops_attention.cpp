// Causal grouped-query attention over packed sequences. Query head h reads kv head
// h / (n_head / n_kv). Query t attends to keys j in [start of its sequence, t].
// Forward keeps only the log-sum-exp of each softmax row; backward recomputes
//   p_j = exp(scale·q·k_j − lse),  D = dO·O,  ds_j = p_j·(dO·v_j − D)
//   dq = scale·Σ ds_j k_j,  dk_j += scale·ds_j q,  dv_j += p_j dO
// Queries go in blocks of kQueries (flash-attention style tiles): every key and value row
// is read once per block, and the block's probability (and score-gradient) rows are the
// only softmax state, kQueries x sequence length in the caller's scratch. The products are
// tile_products.h's.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "nightlora/engine/reference_products.h"
#include "nightlora/util/error.h"
#include "ops.h"
#include "tile_products.h"
#include "vec4.h"

namespace nl {
namespace {

using vec4::f4;
using vec4::f8;
using vec4::load_n;
using vec4::store_n;
constexpr int kQueries = static_cast<int>(kAttnQueryBlock);
static_assert(kQueries <= tile::kTileRows, "a query block is one tile of rows");

// Task scratch for query head h over the sequence starting at s0: two tiles of kQueries
// rows, then the head's parts of dk and dv (attn_scratch_per_token floats per token).
float* task_scratch(const AttnShape& s, int64_t h, int64_t s0) {
  return s.scratch + attn_scratch_per_token(s.hd) * (h * s.T + s0);
}

void require_scratch(const AttnShape& s) {
  if (!s.scratch) fail("attention", "no scratch given", "pass attn_scratch_floats(n_head, T, hd) floats in AttnShape");
}

// Pointers to rows t0 .. t0+nq-1 of M (from column col), or of a tile (row a at M + a*ld).
template <class T>
void block_rows(T* M, int64_t ld, int64_t col, int64_t t0, int nq, T* rows[kQueries]) {
  for (int a = 0; a < nq; ++a) rows[a] = M + (t0 + a) * ld + col;
}

// p[j] = exp(p[j] - shift) for j < valid, 0 for valid <= j < n; returns the sum of the first.
// The sum runs over four-float vectors; the exponentials are made eight at a time (vec4's
// exponential is the same arithmetic lane by lane at either width), their two halves added
// to the sum one after the other as two four-float steps add them: the same bits as four
// at a time, with half the instructions for the exponential in the x86-64-v3 build (on Zen
// 5, 0.97-1.37% of the training step's CPU samples before, 0.85% after).
NL_HOST_KERNEL
float exp_shifted(float* p, int64_t valid, int64_t n, float shift) {
  const f4 s = vec4::splat(shift);
  f4 sum = {};
  int64_t j = 0;
  for (; j + 8 <= valid; j += 8) {
    const f8 e = vec4::exp(vec4::load8(p + j) - shift);
    sum += __builtin_shufflevector(e, e, 0, 1, 2, 3);
    sum += __builtin_shufflevector(e, e, 4, 5, 6, 7);
    vec4::store8(p + j, e);
  }
  for (; j + 4 <= valid; j += 4) {
    const f4 e = vec4::exp(vec4::load(p + j) - s);
    sum += e;
    vec4::store(p + j, e);
  }
  if (j < valid) {  // the last, partial vector: lanes past `valid` are 0
    const int64_t nj = valid - j;
    f4 e = vec4::exp(load_n(p + j, nj) - s);
    for (int64_t l = nj; l < 4; ++l) e[l] = 0.0f;
    sum += e;
    store_n(p + j, e, std::min<int64_t>(4, n - j));
    j += 4;
  }
  for (; j < n; ++j) p[j] = 0.0f;
  return vec4::sum(sum);
}

}  // namespace

void attention_forward(const AttnShape& s, const float* q, const float* k, const float* v, float* out, float* lse,
                       ThreadPool& pool) {
  const int64_t hd = s.hd, qd = s.n_head * hd, kvd = s.n_kv * hd, group = s.n_head / s.n_kv;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  require_scratch(s);
  pool.parallel_for(s.n_head * s.n_seq, [&](int64_t task) {
    const int64_t h = task / s.n_seq, sq = task % s.n_seq, g = h / group;
    const int64_t s0 = s.seq_start[sq], s1 = s.seq_start[sq + 1], L = s1 - s0;
    // Query rows [r0, r1) of q, out and lse hold positions [s1 - (r1 - r0), s1) of the keys:
    // with q_start, only the sequence's last rows; else all of them (r = t).
    const int64_t r0 = s.q_start ? s.q_start[sq] : s0, r1 = s.q_start ? s.q_start[sq + 1] : s1;
    const int64_t first = s1 - (r1 - r0);  // the first query's key row
    float* P = task_scratch(s, h, s0);
    const float* K = k + s0 * kvd + g * hd;
    const float* V = v + s0 * kvd + g * hd;
    // Each query's numbers do not depend on its block (the products' sums run in key order
    // per row; past the causal edge p = 0), so a block grid from `first` equals one from s0.
    for (int64_t t0 = first; t0 < s1; t0 += kQueries) {
      const int nq = static_cast<int>(std::min<int64_t>(kQueries, s1 - t0));
      const int64_t nk = t0 + nq - s0;  // keys of the block's last query
      const int64_t row0 = r0 + (t0 - first);  // the block's first row in q, out, lse
      const float *Q[kQueries], *Prow[kQueries];
      float* O[kQueries];
      float inv_sum[kQueries];
      block_rows(q, qd, h * hd, row0, nq, Q);
      block_rows(out, qd, h * hd, row0, nq, O);
      block_rows<const float>(P, L, 0, 0, nq, Prow);
      tile::dots(Q, nq, K, kvd, nk, hd, scale, P, L);
      for (int a = 0; a < nq; ++a) {  // p = exp(s - max) up to the causal edge, 0 after it
        float* p = P + a * L;
        const int64_t valid = t0 + a - s0 + 1;
        const float m = vec4::max_of(p, valid);
        const float sum = exp_shifted(p, valid, nk, m);
        lse[(row0 + a) * s.n_head + h] = m + std::log(sum);
        inv_sum[a] = 1.0f / sum;
      }
      tile::weighted_rows(Prow, nq, V, kvd, nk, hd, 1.0f, O, false);
      for (int a = 0; a < nq; ++a)  // out = Σ_j p_j v_j / Σ_j p_j
        for (int64_t i = 0; i < hd; i += 4) store_n(O[a] + i, load_n(O[a] + i, hd - i) * vec4::splat(inv_sum[a]), hd - i);
    }
  });
}

void attention_backward(const AttnShape& s, const float* dout, const float* q, const float* k, const float* v,
                        const float* out, const float* lse, float* dq, float* dk, float* dv, ThreadPool& pool) {
  const int64_t hd = s.hd, qd = s.n_head * hd, kvd = s.n_kv * hd, group = s.n_head / s.n_kv;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  require_scratch(s);
  if (s.q_start) fail("attention backward", "given query rows of a shared prefix (q_start)", "q_start is for forward only");
  // One task per (query head, sequence): it owns dq of that head and accumulates the head's
  // own share of dk and dv in its scratch (contiguous rows; no two tasks write one cache
  // line). As many tasks as query heads, so every thread has work even with 2 kv heads.
  pool.parallel_for(s.n_head * s.n_seq, [&](int64_t task) {
    const int64_t h = task / s.n_seq, sq = task % s.n_seq, g = h / group;
    const int64_t s0 = s.seq_start[sq], s1 = s.seq_start[sq + 1], L = s1 - s0;
    const float* K = k + s0 * kvd + g * hd;
    const float* V = v + s0 * kvd + g * hd;
    float* P = task_scratch(s, h, s0);
    float* dS = P + kQueries * L;
    float* dK = dS + kQueries * L;  // L x hd: this head's part of dk, then of dv
    float* dV = dK + L * hd;
    std::memset(dK, 0, static_cast<size_t>(2 * L * hd) * sizeof(float));
    for (int64_t t0 = s0; t0 < s1; t0 += kQueries) {
      const int nq = static_cast<int>(std::min<int64_t>(kQueries, s1 - t0));
      const int64_t nk = t0 + nq - s0;
      const float *Q[kQueries], *dO[kQueries], *Prow[kQueries], *dSrow[kQueries];
      float* dQ[kQueries];
      block_rows(q, qd, h * hd, t0, nq, Q);
      block_rows(dout, qd, h * hd, t0, nq, dO);
      block_rows(dq, qd, h * hd, t0, nq, dQ);
      block_rows<const float>(P, L, 0, 0, nq, Prow);
      block_rows<const float>(dS, L, 0, 0, nq, dSrow);
      tile::dots(Q, nq, K, kvd, nk, hd, scale, P, L);
      tile::dots(dO, nq, V, kvd, nk, hd, 1.0f, dS, L);
      for (int a = 0; a < nq; ++a) {
        const int64_t t = t0 + a;
        float* p = P + a * L;
        float* ds = dS + a * L;
        exp_shifted(p, t - s0 + 1, nk, lse[t * s.n_head + h]);
        const f4 D = vec4::splat(dot_f32(dO[a], out + t * qd + h * hd, hd)), sc = vec4::splat(scale);
        for (int64_t j = 0; j < nk; j += 4)  // ds = scale · p ⊙ (dO·v − D); 0 past the causal edge (p = 0)
          store_n(ds + j, sc * load_n(p + j, nk - j) * (load_n(ds + j, nk - j) - D), nk - j);
      }
      tile::add_outer(Prow, nq, dO, nk, hd, 1.0f, dV, hd);              // dv_j += Σ_a p_aj dO_a
      tile::add_outer(dSrow, nq, Q, nk, hd, 1.0f, dK, hd);              // dk_j += scale Σ_a ds_aj q_a
      tile::weighted_rows(dSrow, nq, K, kvd, nk, hd, 1.0f, dQ, false);  // dq_a = scale Σ_j ds_aj k_j
    }
  });
  // dk and dv of each kv head: its query heads' parts summed in head order.
  pool.parallel_for(s.n_kv * s.n_seq, [&](int64_t task) {
    const int64_t g = task / s.n_seq, sq = task % s.n_seq;
    const int64_t s0 = s.seq_start[sq], L = s.seq_start[sq + 1] - s0;
    for (int64_t j = 0; j < L; ++j)
      for (int which = 0; which < 2; ++which) {
        float* dst = (which == 0 ? dk : dv) + (s0 + j) * kvd + g * hd;
        for (int64_t h = g * group; h < (g + 1) * group; ++h) {
          const float* part = task_scratch(s, h, s0) + 2 * kQueries * L + which * L * hd + j * hd;
          for (int64_t i = 0; i < hd; i += 4) {
            const f4 x = load_n(part + i, hd - i);
            store_n(dst + i, h == g * group ? x : load_n(dst + i, hd - i) + x, hd - i);
          }
        }
      }
  });
}

}  // namespace nl
