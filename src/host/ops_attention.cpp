// Causal grouped-query attention over packed sequences. Query head h reads kv head
// h / (n_head / n_kv). Query t attends to keys j in [start of its sequence, t].
// Forward keeps only the log-sum-exp of each softmax row; backward recomputes
//   p_j = exp(scale·q·k_j − lse),  D = dO·O,  ds_j = p_j·(dO·v_j − D)
//   dq = scale·Σ ds_j k_j,  dk_j += scale·ds_j q,  dv_j += p_j dO
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "nightlora/engine/reference_products.h"
#include "ops.h"

namespace nl {
namespace {

// A task's softmax row when the caller gives no scratch. Tasks are (head or kv head) x
// sequence, so with the caller's n_head x T scratch each task owns [head * T + seq start, ...).
float* scratch(int64_t n) {
  thread_local std::vector<float> buf;
  if (static_cast<int64_t>(buf.size()) < n) buf.resize(static_cast<size_t>(n));
  return buf.data();
}

}  // namespace

void attention_forward(const AttnShape& s, const float* q, const float* k, const float* v, float* out, float* lse,
                       ThreadPool& pool) {
  const int64_t hd = s.hd, qd = s.n_head * hd, kvd = s.n_kv * hd, group = s.n_head / s.n_kv;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  pool.parallel_for(s.n_head * s.n_seq, [&](int64_t task) {
    const int64_t h = task / s.n_seq, sq = task % s.n_seq, g = h / group;
    const int64_t s0 = s.seq_start[sq], s1 = s.seq_start[sq + 1];
    float* p = s.scratch ? s.scratch + h * s.T + s0 : scratch(s1 - s0);
    for (int64_t t = s0; t < s1; ++t) {
      const float* qt = q + t * qd + h * hd;
      float m = -INFINITY;
      for (int64_t j = s0; j <= t; ++j) {
        p[j - s0] = scale * dot_f32(qt, k + j * kvd + g * hd, hd);
        m = std::max(m, p[j - s0]);
      }
      double sum = 0;
      for (int64_t j = s0; j <= t; ++j) {
        p[j - s0] = std::exp(p[j - s0] - m);
        sum += p[j - s0];
      }
      const float inv = static_cast<float>(1.0 / sum);
      float* o = out + t * qd + h * hd;
      std::memset(o, 0, static_cast<size_t>(hd) * sizeof(float));
      for (int64_t j = s0; j <= t; ++j) {
        const float pj = p[j - s0] * inv;
        const float* vj = v + j * kvd + g * hd;
        for (int64_t i = 0; i < hd; ++i) o[i] += pj * vj[i];
      }
      lse[t * s.n_head + h] = m + static_cast<float>(std::log(sum));
    }
  });
}

void attention_backward(const AttnShape& s, const float* dout, const float* q, const float* k, const float* v,
                        const float* out, const float* lse, float* dq, float* dk, float* dv, ThreadPool& pool) {
  const int64_t hd = s.hd, qd = s.n_head * hd, kvd = s.n_kv * hd, group = s.n_head / s.n_kv;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  // One task per (kv head, sequence): it owns dk/dv of that kv head over the sequence and
  // dq of the query heads of its group there, so no two tasks write the same element.
  pool.parallel_for(s.n_kv * s.n_seq, [&](int64_t task) {
    const int64_t g = task / s.n_seq, sq = task % s.n_seq;
    const int64_t s0 = s.seq_start[sq], s1 = s.seq_start[sq + 1];
    for (int64_t j = s0; j < s1; ++j) {
      std::memset(dk + j * kvd + g * hd, 0, static_cast<size_t>(hd) * sizeof(float));
      std::memset(dv + j * kvd + g * hd, 0, static_cast<size_t>(hd) * sizeof(float));
    }
    float* ds = s.scratch ? s.scratch + g * s.T + s0 : scratch(s1 - s0);
    for (int64_t h = g * group; h < (g + 1) * group; ++h) {
      for (int64_t t = s0; t < s1; ++t) {
        const float* qt = q + t * qd + h * hd;
        const float* dot_ = dout + t * qd + h * hd;
        const float D = dot_f32(dot_, out + t * qd + h * hd, hd);
        const float l = lse[t * s.n_head + h];
        for (int64_t j = s0; j <= t; ++j) {
          const float* kj = k + j * kvd + g * hd;
          const float* vj = v + j * kvd + g * hd;
          const float pj = std::exp(scale * dot_f32(qt, kj, hd) - l);
          ds[j - s0] = pj * (dot_f32(dot_, vj, hd) - D);
          float* dvj = dv + j * kvd + g * hd;
          for (int64_t i = 0; i < hd; ++i) dvj[i] += pj * dot_[i];
        }
        float* dqt = dq + t * qd + h * hd;
        std::memset(dqt, 0, static_cast<size_t>(hd) * sizeof(float));
        for (int64_t j = s0; j <= t; ++j) {
          const float d = scale * ds[j - s0];
          const float* kj = k + j * kvd + g * hd;
          float* dkj = dk + j * kvd + g * hd;
          for (int64_t i = 0; i < hd; ++i) {
            dqt[i] += d * kj[i];
            dkj[i] += d * qt[i];
          }
        }
      }
    }
  });
}

}  // namespace nl
