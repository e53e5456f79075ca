// The reference decoder (reference_decoder.h): the original row-by-row path, the oracle of
// the engine-backed Decoder.
#include "nightlora/infer/reference_decoder.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "nightlora/host/lora.h"
#include "nightlora/quant/qtype.h"
#include "nightlora/util/error.h"
#include "nightlora/util/thread_pool.h"
#include "adapter_fit.h"
#include "rope.h"
#include "row_matmul.h"

namespace nl {
namespace {

// Norm weights and biases are small vectors: kept as f32 whatever their stored type.
std::vector<float> to_floats(const TensorView& t) {
  if (!t.present()) return {};
  std::vector<float> v(static_cast<size_t>(t.cols()));
  dequantize_row(t.type, t.data, v.data(), t.cols());
  return v;
}

// y = x / sqrt(mean(x²) + eps) * w over n values; the mean is summed in double as llama.cpp does.
void rms_norm(const float* x, const float* w, float eps, int64_t n, float* y) {
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  const float inv = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + eps));
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * inv * w[i];
}

}  // namespace

struct ReferenceDecoder::Impl {
  struct RefLayerVectors {
    std::vector<float> attn_norm, ffn_norm, bq, bk, bv, q_norm, k_norm;
  };
  // Per-layer KV cache: positions x kv_dim, for keys (after RoPE) and values.
  struct LayerCache {
    std::vector<float> k, v;
  };

  const Model& model;
  const ModelConfig& c;
  ThreadPool pool;
  Rope rope;
  int64_t max_ctx = 0;
  int64_t n_past = 0;
  int64_t capacity = 0;  // positions the caches currently hold room for
  const LoraAdapter* lora = nullptr;
  std::vector<RefLayerVectors> vecs;
  std::vector<float> out_norm;
  std::vector<LayerCache> cache;

  Impl(const Model& m, const DecoderOptions& opt)
      : model(m), c(m.config), pool(opt.threads), rope(m.config) {
    max_ctx = opt.max_context > 0 ? opt.max_context : c.context;
    for (const LayerWeights& l : m.weights.layers)
      vecs.push_back({to_floats(l.attn_norm), to_floats(l.ffn_norm), to_floats(l.bq), to_floats(l.bk),
                      to_floats(l.bv), to_floats(l.q_norm), to_floats(l.k_norm)});
    out_norm = to_floats(m.weights.output_norm);
    cache.resize(static_cast<size_t>(c.n_layer));
  }

  void reserve(int64_t positions) {
    if (positions <= capacity) return;
    const int64_t cap = std::min(max_ctx, std::max(positions, capacity * 2));
    for (LayerCache& lc : cache) {
      lc.k.resize(static_cast<size_t>(cap * c.kv_dim()));
      lc.v.resize(static_cast<size_t>(cap * c.kv_dim()));
    }
    capacity = cap;
  }

  // out (T x rows) = in·Wᵀ (+ bias) (+ LoRA) for projection p of layer l.
  void project(int64_t l, Proj p, const float* in, int64_t T, float* out, const std::vector<float>& bias) {
    const TensorView& w = model.weights.layers[static_cast<size_t>(l)].proj(p);
    const int64_t rows = w.rows(), cols = w.cols();
    matmul_rows(w, in, T, out, pool);
    if (!bias.empty())
      for (int64_t t = 0; t < T; ++t)
        for (int64_t r = 0; r < rows; ++r) out[t * rows + r] += bias[static_cast<size_t>(r)];
    if (!lora) return;
    const LoraPair& pair = lora->at(l, p);
    if (!pair.enabled) return;
    const int64_t rank = static_cast<int64_t>(pair.A.size()) / cols;
    const float scale = lora->cfg.scale();
    std::vector<float> xa(static_cast<size_t>(T * rank));  // x·Aᵀ
    for (int64_t t = 0; t < T; ++t)
      for (int64_t k = 0; k < rank; ++k) xa[t * rank + k] = dot(pair.A.data() + k * cols, in + t * cols, cols);
    pool.parallel_ranges(rows, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t t = 0; t < T; ++t) out[t * rows + r] += scale * dot(xa.data() + t * rank, pair.B.data() + r * rank, rank);
    });
  }

  // Causal attention of the T new queries over the cache (which already holds their keys).
  void attend(int64_t l, const float* q, int64_t T, float* out) {
    const int64_t hd = c.head_dim, kvd = c.kv_dim(), group = c.n_head / c.n_kv_head;
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    const LayerCache& lc = cache[static_cast<size_t>(l)];
    pool.parallel_ranges(T * c.n_head, [&](int64_t i0, int64_t i1) {
      std::vector<float> score(static_cast<size_t>(n_past + T));
      for (int64_t i = i0; i < i1; ++i) {
        const int64_t t = i / c.n_head, h = i % c.n_head, kvh = h / group;
        const int64_t n_keys = n_past + t + 1;
        const float* qh = q + t * c.q_dim() + h * hd;
        float mx = -INFINITY;
        for (int64_t s = 0; s < n_keys; ++s) {
          score[s] = dot(qh, lc.k.data() + s * kvd + kvh * hd, hd) * scale;
          mx = std::max(mx, score[s]);
        }
        float sum = 0;
        for (int64_t s = 0; s < n_keys; ++s) sum += score[s] = std::exp(score[s] - mx);
        float* o = out + t * c.q_dim() + h * hd;
        std::fill(o, o + hd, 0.0f);
        for (int64_t s = 0; s < n_keys; ++s) {
          const float p = score[s] / sum;
          const float* vs = lc.v.data() + s * kvd + kvh * hd;
          for (int64_t e = 0; e < hd; ++e) o[e] += p * vs[e];
        }
      }
    });
  }

  std::vector<float> forward(std::span<const int32_t> tokens, bool all_logits) {
    const int64_t T = static_cast<int64_t>(tokens.size());
    if (T == 0) fail("reference decoder", "forward called with no tokens");
    if (n_past + T > max_ctx)
      fail("reference decoder", "context of " + std::to_string(max_ctx) + " tokens exceeded (" + std::to_string(n_past) +
                          " cached + " + std::to_string(T) + " new)",
           "use a shorter prompt or fewer new tokens (-n)");
    for (int32_t id : tokens)
      if (id < 0 || id >= c.vocab)
        fail("reference decoder", "token id " + std::to_string(id) + " is outside the vocabulary (0.." + std::to_string(c.vocab - 1) + ")");
    reserve(n_past + T);

    const int64_t d = c.d_model, qd = c.q_dim(), kvd = c.kv_dim(), ff = c.d_ff, hd = c.head_dim;
    std::vector<float> x(T * d), h(T * d), q(T * qd), k(T * kvd), v(T * kvd), att(T * qd), tmp(T * d), g(T * ff),
        u(T * ff);
    const TensorView& embd = model.weights.tok_embd;
    for (int64_t t = 0; t < T; ++t) dequantize_row(embd.type, embd.row(tokens[t]), x.data() + t * d, d);

    const int64_t half = rope.n_pairs();
    std::vector<float> cosv(T * half), sinv(T * half);
    for (int64_t t = 0; t < T; ++t) rope.angles(n_past + t, cosv.data() + t * half, sinv.data() + t * half);

    for (int64_t l = 0; l < c.n_layer; ++l) {
      const RefLayerVectors& lv = vecs[static_cast<size_t>(l)];
      for (int64_t t = 0; t < T; ++t) rms_norm(x.data() + t * d, lv.attn_norm.data(), c.rms_eps, d, h.data() + t * d);
      project(l, Proj::Q, h.data(), T, q.data(), lv.bq);
      project(l, Proj::K, h.data(), T, k.data(), lv.bk);
      project(l, Proj::V, h.data(), T, v.data(), lv.bv);
      for (int64_t t = 0; t < T; ++t) {
        float* qt = q.data() + t * qd;
        float* kt = k.data() + t * kvd;
        if (c.qk_norm) {  // qwen3: RMSNorm of each head before RoPE
          for (int64_t hh = 0; hh < c.n_head; ++hh) rms_norm(qt + hh * hd, lv.q_norm.data(), c.rms_eps, hd, qt + hh * hd);
          for (int64_t hh = 0; hh < c.n_kv_head; ++hh) rms_norm(kt + hh * hd, lv.k_norm.data(), c.rms_eps, hd, kt + hh * hd);
        }
        rope.rotate(qt, c.n_head, cosv.data() + t * half, sinv.data() + t * half);
        rope.rotate(kt, c.n_kv_head, cosv.data() + t * half, sinv.data() + t * half);
        LayerCache& lc = cache[static_cast<size_t>(l)];
        std::copy(kt, kt + kvd, lc.k.begin() + (n_past + t) * kvd);
        std::copy(v.data() + t * kvd, v.data() + (t + 1) * kvd, lc.v.begin() + (n_past + t) * kvd);
      }
      attend(l, q.data(), T, att.data());
      project(l, Proj::O, att.data(), T, tmp.data(), {});
      for (int64_t i = 0; i < T * d; ++i) x[i] += tmp[i];

      for (int64_t t = 0; t < T; ++t) rms_norm(x.data() + t * d, lv.ffn_norm.data(), c.rms_eps, d, h.data() + t * d);
      project(l, Proj::Gate, h.data(), T, g.data(), {});
      project(l, Proj::Up, h.data(), T, u.data(), {});
      for (int64_t i = 0; i < T * ff; ++i) g[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];  // SwiGLU
      project(l, Proj::Down, g.data(), T, tmp.data(), {});
      for (int64_t i = 0; i < T * d; ++i) x[i] += tmp[i];
    }

    const int64_t first = all_logits ? 0 : T - 1, n_out = T - first;
    for (int64_t t = first; t < T; ++t)
      rms_norm(x.data() + t * d, out_norm.data(), c.rms_eps, d, h.data() + (t - first) * d);
    std::vector<float> logits(static_cast<size_t>(n_out * c.vocab));
    matmul_rows(model.weights.output, h.data(), n_out, logits.data(), pool);
    n_past += T;
    return logits;
  }
};

ReferenceDecoder::ReferenceDecoder(const Model& model, const DecoderOptions& opt) : impl_(std::make_unique<Impl>(model, opt)) {}
ReferenceDecoder::~ReferenceDecoder() = default;

void ReferenceDecoder::set_adapter(const LoraAdapter* a) {
  if (a) check_adapter_fits(impl_->model, *a);
  impl_->lora = a;
}

std::vector<float> ReferenceDecoder::forward(std::span<const int32_t> tokens, bool all_logits) {
  return impl_->forward(tokens, all_logits);
}
int64_t ReferenceDecoder::n_past() const { return impl_->n_past; }
int64_t ReferenceDecoder::max_context() const { return impl_->max_ctx; }
void ReferenceDecoder::reset() { impl_->n_past = 0; }
void ReferenceDecoder::truncate(int64_t n) {
  if (n < 0 || n > impl_->n_past)
    fail("reference decoder", "cannot keep " + std::to_string(n) + " cached positions: only " + std::to_string(impl_->n_past) +
                        " are cached");
  impl_->n_past = n;
}
const Model& ReferenceDecoder::model() const { return impl_->model; }

}  // namespace nl
