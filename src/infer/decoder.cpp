// The decoder on the frozen engine (decoder.h). Per block of new tokens (a prompt chunk, or
// the one token of a decode step):
//   RMSNorm ─► Q, K, V = engine products (+ bias, + LoRA)  ─► Q/K norm ─► RoPE
//   ─► K, V appended to the cache (f16 or f32) ─► attention over the cache
//   ─► O = engine product (+ LoRA) ─► residual
//   ─► RMSNorm ─► gate, up = engine products (+ LoRA) ─► SwiGLU ─► down (+ LoRA) ─► residual
// then the final norm and the output head on the rows whose logits are wanted. The host ops
// are the training step's (src/host/ops*.cpp) where they fit; attention over the cache is
// cached_attention.h. Products are submitted together where they share their input (Q, K,
// V; gate, up), so the engine runs them back to back.
#include "nightlora/host/layer_vectors.h"
#include "nightlora/infer/decoder.h"
#include "nightlora/infer/inference_memory.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "adapter_fit.h"
#include "cached_attention.h"
#include "host/ops.h"
#include "nightlora/host/lora.h"
#include "nightlora/quant/qtype.h"
#include "nightlora/util/error.h"
#include "nightlora/util/thread_pool.h"
#include "rope.h"

namespace nl {

const char* kv_type_name(KvType t) { return t == KvType::F16 ? "f16" : "f32"; }

KvType parse_kv_type(const std::string& s) {
  if (s == "f16") return KvType::F16;
  if (s == "f32") return KvType::F32;
  fail("kv type '" + s + "'", "unknown KV cache type", "use f16 or f32");
}

namespace {


// Grows v to at least n elements (never shrinks: buffers are reused across forwards).
template <class T>
void grow(std::vector<T>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
}

EngineOptions engine_options(const DecoderOptions& opt) {
  EngineOptions e;
  e.backend = opt.backend;
  e.threads = opt.threads;
  e.waiter_runs_products = true;  // every product is waited for at once (run_layers)
  return e;
}

}  // namespace

struct Decoder::Impl {
  const Model& model;
  const ModelConfig& c;
  DecoderOptions opt;
  std::unique_ptr<FrozenEngine> owned;  // null when borrowed
  FrozenEngine& engine;
  ThreadPool pool;
  const infer::AttentionKernels& attn = infer::attention_kernels();
  Rope rope;
  int64_t max_ctx = 0;
  int64_t n_past = 0;
  int64_t capacity = 0;  // positions the cache holds room for
  const LoraAdapter* lora = nullptr;
  std::vector<LayerVectors> vecs;
  std::vector<float> out_norm;
  // KV cache, per layer: positions x kv_dim keys (after RoPE) and values, as f16 bits
  // (k16, v16) or floats (k32, v32) depending on opt.kv_type.
  std::vector<std::vector<uint16_t>> k16, v16;
  std::vector<std::vector<float>> k32, v32;
  // Activations of one block of new tokens (grown to the largest block seen).
  std::vector<float> x, h, q, k, v, att, tmp, g, u, rstd, cosv, sinv, z, logits_in;
  std::vector<std::vector<float>> attn_scratch;  // per pool worker

  Impl(const Model& m, std::unique_ptr<FrozenEngine> own, FrozenEngine& e, const DecoderOptions& o)
      : model(m),
        c(m.config),
        opt(o),
        owned(std::move(own)),
        engine(e),
        pool(o.threads > 0 ? o.threads : e.threads()),
        rope(m.config) {
    if (opt.prefill_chunk <= 0) fail("decoder", "prefill_chunk must be positive");
    if (c.n_kv_head <= 0 || c.n_head % c.n_kv_head != 0 || c.n_head / c.n_kv_head > 64)
      fail(m.source_path, "attention heads (" + std::to_string(c.n_head) + " query, " + std::to_string(c.n_kv_head) +
                              " key/value) are not a supported grouping",
           "the decoder supports up to 64 query heads per key/value head");
    max_ctx = opt.max_context > 0 ? opt.max_context : c.context;
    check_engine_fits();
    ModelVectors mv = load_model_vectors(m);
    vecs = std::move(mv.layers);
    out_norm = std::move(mv.output_norm);
    const size_t L = static_cast<size_t>(c.n_layer);
    if (opt.kv_type == KvType::F16) k16.resize(L), v16.resize(L);
    else k32.resize(L), v32.resize(L);
    attn_scratch.resize(static_cast<size_t>(pool.size()));
    // Given a context, the cache is sized for it once; otherwise it grows as it fills.
    if (opt.max_context > 0) reserve(max_ctx);
  }

  // A borrowed engine must hold this model's matrices.
  void check_engine_fits() const {
    auto check = [&](WeightHandle hnd, const TensorView& w, const std::string& what) {
      if (engine.rows(hnd) != w.rows() || engine.cols(hnd) != w.cols())
        fail("decoder", what + " is " + std::to_string(engine.rows(hnd)) + " x " + std::to_string(engine.cols(hnd)) +
                            " in the engine, " + std::to_string(w.rows()) + " x " + std::to_string(w.cols()) +
                            " in the model",
             "give the decoder the engine made for this model");
    };
    for (int64_t l = 0; l < c.n_layer; ++l)
      for (int p = 0; p < kNumProj; ++p)
        check(engine.handle(l, static_cast<Proj>(p)), model.weights.layers[static_cast<size_t>(l)].proj(static_cast<Proj>(p)),
              "layer " + std::to_string(l) + " " + proj_name(static_cast<Proj>(p)));
    const TensorView& head = model.weights.output.present() ? model.weights.output : model.weights.tok_embd;
    check(engine.output_handle(), head, "the output head");
  }

  void reserve(int64_t positions) {
    if (positions <= capacity) return;
    const int64_t cap = std::min(max_ctx, std::max(positions, capacity * 2));
    const size_t n = static_cast<size_t>(cap * c.kv_dim());
    for (size_t l = 0; l < static_cast<size_t>(c.n_layer); ++l) {
      if (opt.kv_type == KvType::F16) k16[l].resize(n), v16[l].resize(n);
      else k32[l].resize(n), v32[l].resize(n);
    }
    capacity = cap;
  }

  size_t kv_bytes() const { return nl::kv_cache_bytes(c, capacity, opt.kv_type); }

  void size_buffers(int64_t T) {
    const int64_t d = c.d_model, qd = c.q_dim(), kvd = c.kv_dim(), ff = c.d_ff;
    for (auto* b : {&x, &h, &tmp}) grow(*b, T * d);
    for (auto* b : {&q, &att}) grow(*b, T * qd);
    for (auto* b : {&k, &v}) grow(*b, T * kvd);
    for (auto* b : {&g, &u}) grow(*b, T * ff);
    grow(rstd, T * std::max(c.n_head, c.n_kv_head));
    grow(cosv, T * rope.n_pairs());
    grow(sinv, T * rope.n_pairs());
  }

  // The LoRA branch of projection p of layer l, added to out (T x rows).
  void add_lora(int64_t l, Proj p, const float* in, int64_t T, float* out) {
    if (!lora) return;
    const LoraPair& pair = lora->at(l, p);
    if (!pair.enabled) return;
    const int64_t rank = lora->cfg.rank;
    const LoraBranch br{pair.A.data(), pair.B.data(), rank, pair.in, pair.out, lora->cfg.scale(), 0.0f, 0};
    grow(z, T * rank);
    lora_down(br, in, T, z.data(), pool);
    lora_up_add(br, z.data(), T, out, pool);
  }

  // The mode of a product of T tokens on h (DecoderOptions::few_token_f32).
  Precision mode_for(WeightHandle h, int64_t T) const {
    return opt.few_token_f32 ? engine.mode_for_tokens(h, T, opt.precision) : opt.precision;
  }

  // Submits out = in·Wᵀ for projection p of layer l (the engine runs it; wait before use).
  EngineTicket submit(int64_t l, Proj p, const float* in, int64_t T, float* out) {
    const WeightHandle h = engine.handle(l, p);
    return engine.submit_forward(h, in, T, out, mode_for(h, T));
  }

  // Tokens [0, T) of the block at positions n_past .. n_past + T - 1: through every layer.
  void run_layers(std::span<const int32_t> tokens) {
    const int64_t T = static_cast<int64_t>(tokens.size());
    const int64_t d = c.d_model, qd = c.q_dim(), kvd = c.kv_dim(), ff = c.d_ff, hd = c.head_dim;
    size_buffers(T);
    embedding_forward(model.weights.tok_embd, tokens.data(), T, x.data(), pool);
    const int64_t half = rope.n_pairs();
    for (int64_t t = 0; t < T; ++t) rope.angles(n_past + t, cosv.data() + t * half, sinv.data() + t * half);

    for (int64_t l = 0; l < c.n_layer; ++l) {
      const LayerVectors& lv = vecs[static_cast<size_t>(l)];
      rmsnorm_forward(x.data(), lv.attn_norm.data(), T, d, c.rms_eps, h.data(), rstd.data(), pool);
      submit(l, Proj::Q, h.data(), T, q.data());
      submit(l, Proj::K, h.data(), T, k.data());
      engine.wait(submit(l, Proj::V, h.data(), T, v.data()));
      if (!lv.bq.empty()) add_bias(q.data(), lv.bq.data(), T, qd);
      if (!lv.bk.empty()) add_bias(k.data(), lv.bk.data(), T, kvd);
      if (!lv.bv.empty()) add_bias(v.data(), lv.bv.data(), T, kvd);
      add_lora(l, Proj::Q, h.data(), T, q.data());
      add_lora(l, Proj::K, h.data(), T, k.data());
      add_lora(l, Proj::V, h.data(), T, v.data());
      if (c.qk_norm) {  // qwen3: RMSNorm of each head before RoPE (in place: rows of hd)
        rmsnorm_forward(q.data(), lv.q_norm.data(), T * c.n_head, hd, c.rms_eps, q.data(), rstd.data(), pool);
        rmsnorm_forward(k.data(), lv.k_norm.data(), T * c.n_kv_head, hd, c.rms_eps, k.data(), rstd.data(), pool);
      }
      parallel_rows(pool, T, 16, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) {
          rope.rotate(q.data() + t * qd, c.n_head, cosv.data() + t * half, sinv.data() + t * half);
          rope.rotate(k.data() + t * kvd, c.n_kv_head, cosv.data() + t * half, sinv.data() + t * half);
        }
      });
      store_kv(l, T);
      attend(l, T);
      engine.wait(submit(l, Proj::O, att.data(), T, tmp.data()));
      add_lora(l, Proj::O, att.data(), T, tmp.data());
      add_inplace(x.data(), tmp.data(), T * d);

      rmsnorm_forward(x.data(), lv.ffn_norm.data(), T, d, c.rms_eps, h.data(), rstd.data(), pool);
      submit(l, Proj::Gate, h.data(), T, g.data());
      engine.wait(submit(l, Proj::Up, h.data(), T, u.data()));
      add_lora(l, Proj::Gate, h.data(), T, g.data());
      add_lora(l, Proj::Up, h.data(), T, u.data());
      swiglu_forward(g.data(), u.data(), g.data(), T * ff, pool);
      engine.wait(submit(l, Proj::Down, g.data(), T, tmp.data()));
      add_lora(l, Proj::Down, g.data(), T, tmp.data());
      add_inplace(x.data(), tmp.data(), T * d);
    }
  }

  // The block's keys and values into the cache at positions n_past .. n_past + T - 1.
  void store_kv(int64_t l, int64_t T) {
    const int64_t kvd = c.kv_dim();
    const size_t L = static_cast<size_t>(l);
    if (opt.kv_type == KvType::F32) {
      std::copy(k.begin(), k.begin() + T * kvd, k32[L].begin() + n_past * kvd);
      std::copy(v.begin(), v.begin() + T * kvd, v32[L].begin() + n_past * kvd);
      return;
    }
    attn.to_halves(k.data(), T * kvd, k16[L].data() + n_past * kvd);
    attn.to_halves(v.data(), T * kvd, v16[L].data() + n_past * kvd);
  }

  void attend(int64_t l, int64_t T) {
    const size_t L = static_cast<size_t>(l);
    const bool f16 = opt.kv_type == KvType::F16;
    const infer::CachedAttention a{q.data(),
                                   T,
                                   n_past,
                                   c.n_head,
                                   c.n_kv_head,
                                   c.head_dim,
                                   1.0f / std::sqrt(static_cast<float>(c.head_dim)),
                                   opt.kv_type,
                                   f16 ? static_cast<const void*>(k16[L].data()) : k32[L].data(),
                                   f16 ? static_cast<const void*>(v16[L].data()) : v32[L].data(),
                                   att.data()};
    const int64_t scratch = infer::cached_attention_scratch(c.n_head, c.n_kv_head, n_past + T, c.head_dim);
    for (auto& s : attn_scratch) grow(s, scratch);
    const int64_t n_blocks = (T + infer::kMaxQueryBlock - 1) / infer::kMaxQueryBlock;
    pool.parallel_for(n_blocks * c.n_kv_head, [&](int64_t i, int worker) {
      const int64_t t0 = i / c.n_kv_head * infer::kMaxQueryBlock;
      attn.task(a, t0, std::min(T, t0 + infer::kMaxQueryBlock), i % c.n_kv_head,
                attn_scratch[static_cast<size_t>(worker)].data());
    });
  }

  std::vector<float> forward(std::span<const int32_t> tokens, bool all_logits) {
    const int64_t T = static_cast<int64_t>(tokens.size());
    if (T == 0) fail("decoder", "forward called with no tokens");
    if (n_past + T > max_ctx)
      fail("decoder", "context of " + std::to_string(max_ctx) + " tokens exceeded (" + std::to_string(n_past) +
                          " cached + " + std::to_string(T) + " new)",
           "use a shorter prompt or fewer new tokens (-n)");
    for (int32_t id : tokens)
      if (id < 0 || id >= c.vocab)
        fail("decoder", "token id " + std::to_string(id) + " is outside the vocabulary (0.." + std::to_string(c.vocab - 1) + ")");
    reserve(n_past + T);

    const int64_t d = c.d_model;
    std::vector<float> logits(static_cast<size_t>((all_logits ? T : 1) * c.vocab));
    for (int64_t t0 = 0; t0 < T; t0 += opt.prefill_chunk) {
      const int64_t n = std::min(opt.prefill_chunk, T - t0);
      run_layers(tokens.subspan(static_cast<size_t>(t0), static_cast<size_t>(n)));
      n_past += n;
      // The final norm and the head for the rows whose logits are wanted: every row of the
      // chunk, or the prompt's last one.
      const int64_t first = all_logits ? 0 : (t0 + n == T ? n - 1 : n);
      if (first == n) continue;
      grow(logits_in, (n - first) * d);
      rmsnorm_forward(x.data() + first * d, out_norm.data(), n - first, d, c.rms_eps, logits_in.data(), rstd.data(),
                      pool);
      float* out = logits.data() + (all_logits ? t0 + first : 0) * c.vocab;
      const WeightHandle head = engine.output_handle();
      engine.forward(head, logits_in.data(), n - first, out, mode_for(head, n - first));
    }
    return logits;
  }
};

Decoder::Decoder(const Model& model, const DecoderOptions& opt) {
  std::unique_ptr<FrozenEngine> e = make_engine(model, engine_options(opt));
  FrozenEngine& ref = *e;
  impl_ = std::make_unique<Impl>(model, std::move(e), ref, opt);
}
Decoder::Decoder(const Model& model, FrozenEngine& engine, const DecoderOptions& opt)
    : impl_(std::make_unique<Impl>(model, nullptr, engine, opt)) {}
Decoder::~Decoder() = default;

void Decoder::set_adapter(const LoraAdapter* a) {
  if (a) check_adapter_fits(impl_->model, *a);
  impl_->lora = a;
}

std::vector<float> Decoder::forward(std::span<const int32_t> tokens, bool all_logits) {
  return impl_->forward(tokens, all_logits);
}
int64_t Decoder::n_past() const { return impl_->n_past; }
int64_t Decoder::max_context() const { return impl_->max_ctx; }
void Decoder::reset() { impl_->n_past = 0; }
void Decoder::truncate(int64_t n) {
  if (n < 0 || n > impl_->n_past)
    fail("decoder", "cannot keep " + std::to_string(n) + " cached positions: only " + std::to_string(impl_->n_past) +
                        " are cached");
  impl_->n_past = n;
}
const Model& Decoder::model() const { return impl_->model; }
const DecoderOptions& Decoder::options() const { return impl_->opt; }
FrozenEngine& Decoder::engine() { return impl_->engine; }
size_t Decoder::kv_cache_bytes() const { return impl_->kv_bytes(); }
int64_t Decoder::kv_cache_positions() const { return impl_->capacity; }

}  // namespace nl
