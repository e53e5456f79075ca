// The decoder on the frozen engine (decoder.h). Per block of new tokens (a prompt chunk, or
// the one token of a decode step):
//   RMSNorm ─► Q, K, V = engine products (+ bias, + LoRA)  ─► Q/K norm ─► RoPE
//   ─► K, V appended to the cache (f16 or f32) ─► attention over the cache
//   ─► O = engine product (+ LoRA) ─► residual
//   ─► RMSNorm ─► gate, up = engine products (+ LoRA) ─► SwiGLU ─► down (+ LoRA) ─► residual
// then the final norm and the output head on the rows whose logits are wanted. The host ops
// are the training step's (src/host/ops*.cpp) where they fit; attention over the cache is
// cached_attention.h. Products are submitted together where they share their input (Q, K,
// V; gate, up), so the engine runs them back to back. A block's rows may belong to several
// sequences (DecodeBatch: one new token of each): the products take all the rows at once,
// RoPE, the cache, attention and the LoRA branch go per sequence.
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

// Scratch of one pass through the layers: the activations of a block of rows (grown to the
// largest block seen) and the thread pool the host ops run on. A decoder has its own for
// forward(); a DecodeBatch has one for its steps.
struct DecoderWorkspace {
  ThreadPool pool;
  std::vector<float> x, h, q, k, v, att, tmp, g, u, rstd, cosv, sinv, z, logits_in;
  std::vector<std::vector<float>> attn_scratch;  // per pool worker
  std::vector<infer::CachedAttention> attn_segments;  // attention of each segment of a block
  std::vector<int64_t> attn_first_task;               // where each segment's tasks start

  explicit DecoderWorkspace(int threads) : pool(threads), attn_scratch(static_cast<size_t>(pool.size())) {}

  void size_for(const ModelConfig& c, int64_t rope_pairs, int64_t T) {
    const int64_t d = c.d_model, qd = c.q_dim(), kvd = c.kv_dim(), ff = c.d_ff;
    for (auto* b : {&x, &h, &tmp}) grow(*b, T * d);
    for (auto* b : {&q, &att}) grow(*b, T * qd);
    for (auto* b : {&k, &v}) grow(*b, T * kvd);
    for (auto* b : {&g, &u}) grow(*b, T * ff);
    grow(rstd, T * std::max(c.n_head, c.n_kv_head));
    grow(cosv, T * rope_pairs);
    grow(sinv, T * rope_pairs);
  }
};

// A decoder's sequence: its model, engine, options, adapter, KV cache and position. The
// pass through the layers (run_layers) takes a block of rows made of segments, each a run of
// consecutive rows that are one sequence's next tokens: forward() passes one segment (its
// prompt chunk or its one new token), DecodeBatch::step one segment of one row per sequence.
// Every row-wise op (norms, biases, RoPE, SwiGLU, the LoRA branch) and attention run per
// segment as they would alone, and the engine's products give each row the same bits
// whatever rows it is multiplied with, so a sequence's logits do not depend on its company.
struct Decoder::Impl {
  const Model& model;
  const ModelConfig& c;
  DecoderOptions opt;
  std::unique_ptr<FrozenEngine> owned;  // null when borrowed
  FrozenEngine& engine;
  DecoderWorkspace ws;
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

  // Rows [row0, row0 + n) of a block: seq's tokens at positions seq->n_past .. + n - 1, or
  // a tree of them (forward_tree): row t at position seq->n_past + depth[t], attending to its
  // ancestors (parent) after the cache.
  struct Segment {
    Impl* seq;
    int64_t row0, n;
    const int32_t* parent = nullptr;  // with depth: the rows are a tree
    const int32_t* depth = nullptr;
  };

  Impl(const Model& m, std::unique_ptr<FrozenEngine> own, FrozenEngine& e, const DecoderOptions& o)
      : model(m),
        c(m.config),
        opt(o),
        owned(std::move(own)),
        engine(e),
        ws(o.threads > 0 ? o.threads : e.threads()),
        rope(m.config) {
    if (opt.prefill_chunk <= 0) fail("decoder", "prefill_chunk must be positive");
    if (c.n_kv_head <= 0 || c.n_head % c.n_kv_head != 0 || c.n_head / c.n_kv_head > 64)
      fail(m.source_path, "attention heads (" + std::to_string(c.n_head) + " query, " + std::to_string(c.n_kv_head) +
                              " key/value) are not a supported grouping",
           "the decoder supports up to 64 query heads per key/value head");
    max_ctx = opt.max_context > 0 ? opt.max_context : c.context;
    check_engine_fits();
    // What the engine's int8 products need of the weights is made now (the cpu engine's Q8_0
    // copies of F16/F32 ones, at their first reservation), so loading includes it and the
    // engine's resident bytes (describe_inference_memory) count it. On an engine of its own,
    // which runs nothing but this decoder's int8 products, the weights only f32 products
    // read are then freed (an F16 model: 1.06 bytes per weight instead of 3.06).
    if (opt.precision == Precision::Int8) {
      engine.reserve_forward(engine.output_handle(), 1, Precision::Int8);
      for (int64_t l = 0; l < c.n_layer; ++l)
        for (int p = 0; p < kNumProj; ++p) engine.reserve_forward(engine.handle(l, static_cast<Proj>(p)), 1, Precision::Int8);
      if (owned) engine.release_f32_weights();
    }
    ModelVectors mv = load_model_vectors(m);
    vecs = std::move(mv.layers);
    out_norm = std::move(mv.output_norm);
    const size_t L = static_cast<size_t>(c.n_layer);
    if (opt.kv_type == KvType::F16) k16.resize(L), v16.resize(L);
    else k32.resize(L), v32.resize(L);
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

  // Refuses T new tokens that do not fit the context or are not in the vocabulary.
  void check_tokens(const int32_t* tokens, int64_t T) const {
    if (n_past + T > max_ctx)
      fail("decoder", "context of " + std::to_string(max_ctx) + " tokens exceeded (" + std::to_string(n_past) +
                          " cached + " + std::to_string(T) + " new)",
           "use a shorter prompt or fewer new tokens (-n)");
    for (int64_t t = 0; t < T; ++t)
      if (tokens[t] < 0 || tokens[t] >= c.vocab)
        fail("decoder", "token id " + std::to_string(tokens[t]) + " is outside the vocabulary (0.." +
                            std::to_string(c.vocab - 1) + ")");
  }

  // The LoRA branch of projection p of layer l (this sequence's adapter, if any) on T rows,
  // added to out (T x rows).
  void add_lora(DecoderWorkspace& w, int64_t l, Proj p, const float* in, int64_t T, float* out) const {
    if (!lora) return;
    const LoraPair& pair = lora->at(l, p);
    if (!pair.enabled) return;
    const int64_t rank = lora->cfg.rank;
    const LoraBranch br{pair.A.data(), pair.B.data(), rank, pair.in, pair.out, lora->cfg.scale(), 0.0f, 0};
    grow(w.z, T * rank);
    lora_down(br, in, T, w.z.data(), w.pool);
    lora_up_add(br, w.z.data(), T, out, w.pool);
  }

  // T new keys and values (rows of kvd) into the cache at positions n_past .. n_past + T - 1.
  void store_kv(int64_t l, const float* k, const float* v, int64_t T) {
    const int64_t kvd = c.kv_dim();
    const size_t L = static_cast<size_t>(l);
    if (opt.kv_type == KvType::F32) {
      std::copy(k, k + T * kvd, k32[L].begin() + n_past * kvd);
      std::copy(v, v + T * kvd, v32[L].begin() + n_past * kvd);
      return;
    }
    attn.to_halves(k, T * kvd, k16[L].data() + n_past * kvd);
    attn.to_halves(v, T * kvd, v16[L].data() + n_past * kvd);
  }

  // Attention of T query rows q (after RoPE) over this sequence's cache of layer l.
  infer::CachedAttention attention(int64_t l, const float* q, int64_t T, float* out) const {
    const size_t L = static_cast<size_t>(l);
    const bool f16 = opt.kv_type == KvType::F16;
    return {q,
            T,
            n_past,
            c.n_head,
            c.n_kv_head,
            c.head_dim,
            1.0f / std::sqrt(static_cast<float>(c.head_dim)),
            opt.kv_type,
            f16 ? static_cast<const void*>(k16[L].data()) : k32[L].data(),
            f16 ? static_cast<const void*>(v16[L].data()) : v32[L].data(),
            out};
  }

  // The block's rows (tokens[0, T), split into segs, which cover them in order) through
  // every layer; the final hidden states are left in w.x. Every sequence of segs is on
  // segs[0]'s model, engine and product modes (DecodeBatch checks), and has room in its
  // cache. Positions advance afterwards (the caller adds each segment's n to its n_past).
  static void run_layers(DecoderWorkspace& w, std::span<const Segment> segs, const int32_t* tokens, int64_t T) {
    const Impl& s0 = *segs.front().seq;
    const ModelConfig& c = s0.c;
    FrozenEngine& engine = s0.engine;
    const int64_t d = c.d_model, qd = c.q_dim(), kvd = c.kv_dim(), ff = c.d_ff, hd = c.head_dim;
    const int64_t half = s0.rope.n_pairs();
    const auto submit = [&](int64_t l, Proj p, const float* in, float* out) {
      const WeightHandle h = engine.handle(l, p);
      return engine.submit_forward(h, in, T, out, s0.opt.precision);
    };
    // The LoRA branch of each segment's own adapter on its rows.
    const auto add_loras = [&](int64_t l, Proj p, const float* in, int64_t in_cols, float* out, int64_t out_cols) {
      for (const Segment& s : segs)
        s.seq->add_lora(w, l, p, in + s.row0 * in_cols, s.n, out + s.row0 * out_cols);
    };

    w.size_for(c, half, T);
    embedding_forward(s0.model.weights.tok_embd, tokens, T, w.x.data(), w.pool);
    for (const Segment& s : segs)
      for (int64_t t = 0; t < s.n; ++t)
        s0.rope.angles(s.seq->n_past + (s.depth ? s.depth[t] : t), w.cosv.data() + (s.row0 + t) * half, w.sinv.data() + (s.row0 + t) * half);

    for (int64_t l = 0; l < c.n_layer; ++l) {
      const LayerVectors& lv = s0.vecs[static_cast<size_t>(l)];
      rmsnorm_forward(w.x.data(), lv.attn_norm.data(), T, d, c.rms_eps, w.h.data(), w.rstd.data(), w.pool);
      submit(l, Proj::Q, w.h.data(), w.q.data());
      submit(l, Proj::K, w.h.data(), w.k.data());
      engine.wait(submit(l, Proj::V, w.h.data(), w.v.data()));
      if (!lv.bq.empty()) add_bias(w.q.data(), lv.bq.data(), T, qd);
      if (!lv.bk.empty()) add_bias(w.k.data(), lv.bk.data(), T, kvd);
      if (!lv.bv.empty()) add_bias(w.v.data(), lv.bv.data(), T, kvd);
      add_loras(l, Proj::Q, w.h.data(), d, w.q.data(), qd);
      add_loras(l, Proj::K, w.h.data(), d, w.k.data(), kvd);
      add_loras(l, Proj::V, w.h.data(), d, w.v.data(), kvd);
      if (c.qk_norm) {  // qwen3: RMSNorm of each head before RoPE (in place: rows of hd)
        rmsnorm_forward(w.q.data(), lv.q_norm.data(), T * c.n_head, hd, c.rms_eps, w.q.data(), w.rstd.data(), w.pool);
        rmsnorm_forward(w.k.data(), lv.k_norm.data(), T * c.n_kv_head, hd, c.rms_eps, w.k.data(), w.rstd.data(),
                        w.pool);
      }
      parallel_rows(w.pool, T, 16, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) {
          s0.rope.rotate(w.q.data() + t * qd, c.n_head, w.cosv.data() + t * half, w.sinv.data() + t * half);
          s0.rope.rotate(w.k.data() + t * kvd, c.n_kv_head, w.cosv.data() + t * half, w.sinv.data() + t * half);
        }
      });
      for (const Segment& s : segs) s.seq->store_kv(l, w.k.data() + s.row0 * kvd, w.v.data() + s.row0 * kvd, s.n);
      attend(w, l, segs);
      engine.wait(submit(l, Proj::O, w.att.data(), w.tmp.data()));
      add_loras(l, Proj::O, w.att.data(), qd, w.tmp.data(), d);
      add_inplace(w.x.data(), w.tmp.data(), T * d);

      rmsnorm_forward(w.x.data(), lv.ffn_norm.data(), T, d, c.rms_eps, w.h.data(), w.rstd.data(), w.pool);
      submit(l, Proj::Gate, w.h.data(), w.g.data());
      engine.wait(submit(l, Proj::Up, w.h.data(), w.u.data()));
      add_loras(l, Proj::Gate, w.h.data(), d, w.g.data(), ff);
      add_loras(l, Proj::Up, w.h.data(), d, w.u.data(), ff);
      swiglu_forward(w.g.data(), w.u.data(), w.g.data(), T * ff, w.pool);
      engine.wait(submit(l, Proj::Down, w.g.data(), w.tmp.data()));
      add_loras(l, Proj::Down, w.g.data(), ff, w.tmp.data(), d);
      add_inplace(w.x.data(), w.tmp.data(), T * d);
    }
  }

  // Attention of every segment's rows over its own sequence's cache (which holds the block's
  // keys and values already): one task per block of query rows and KV head, all segments'
  // tasks in one parallel loop.
  static void attend(DecoderWorkspace& w, int64_t l, std::span<const Segment> segs) {
    const ModelConfig& c = segs.front().seq->c;
    const int64_t qd = c.q_dim();
    std::vector<infer::CachedAttention>& a = w.attn_segments;
    std::vector<int64_t>& first_task = w.attn_first_task;  // segment i's tasks start at first_task[i]
    a.clear();
    first_task.clear();
    int64_t n_tasks = 0, scratch = 0;
    for (const Segment& s : segs) {
      a.push_back(s.seq->attention(l, w.q.data() + s.row0 * qd, s.n, w.att.data() + s.row0 * qd));
      a.back().parent = s.parent;
      first_task.push_back(n_tasks);
      n_tasks += (s.n + infer::kMaxQueryBlock - 1) / infer::kMaxQueryBlock * c.n_kv_head;
      scratch = std::max(scratch, infer::cached_attention_scratch(c.n_head, c.n_kv_head, s.seq->n_past + s.n, c.head_dim));
    }
    first_task.push_back(n_tasks);
    for (auto& s : w.attn_scratch) grow(s, scratch);
    const infer::AttentionKernels& kernels = segs.front().seq->attn;
    w.pool.parallel_for(n_tasks, [&](int64_t i, int worker) {
      const size_t si = static_cast<size_t>(std::upper_bound(first_task.begin(), first_task.end(), i) - first_task.begin() - 1);
      const int64_t j = i - first_task[si];
      const int64_t t0 = j / c.n_kv_head * infer::kMaxQueryBlock;
      kernels.task(a[si], t0, std::min(a[si].T, t0 + infer::kMaxQueryBlock), j % c.n_kv_head,
                   w.attn_scratch[static_cast<size_t>(worker)].data());
    });
  }

  // Decoder::forward_tree: the tree's rows as one block, their keys and values in the cache's
  // slots after n_past (which stays), every row's logits.
  std::vector<float> forward_tree(std::span<const int32_t> tokens, std::span<const int32_t> parent) {
    const int64_t T = static_cast<int64_t>(tokens.size());
    if (T == 0) fail("decoder", "forward_tree called with no tokens");
    if (parent.size() != tokens.size())
      fail("decoder", "forward_tree got " + std::to_string(T) + " tokens but " + std::to_string(parent.size()) + " parents",
           "give one parent index per token");
    std::vector<int32_t> depth(static_cast<size_t>(T));
    for (int64_t t = 0; t < T; ++t) {
      const int32_t p = parent[static_cast<size_t>(t)];
      if (p < -1 || p >= t)
        fail("decoder", "token " + std::to_string(t) + " of a tree has parent " + std::to_string(p),
             "a parent is -1 (the cached context) or an earlier token of the tree");
      depth[static_cast<size_t>(t)] = p < 0 ? 0 : depth[static_cast<size_t>(p)] + 1;
    }
    // The tree's keys take T cache slots while it runs (its positions need only depth + 1).
    check_tokens(tokens.data(), T);
    reserve(n_past + T);
    const Segment seg{this, 0, T, parent.data(), depth.data()};
    run_layers(ws, std::span<const Segment>(&seg, 1), tokens.data(), T);
    const int64_t d = c.d_model;
    grow(ws.logits_in, T * d);
    rmsnorm_forward(ws.x.data(), out_norm.data(), T, d, c.rms_eps, ws.logits_in.data(), ws.rstd.data(), ws.pool);
    std::vector<float> logits(static_cast<size_t>(T * c.vocab));
    const WeightHandle head = engine.output_handle();
    engine.forward(head, ws.logits_in.data(), T, logits.data(), opt.precision);
    return logits;
  }

  std::vector<float> forward(std::span<const int32_t> tokens, bool all_logits) {
    const int64_t T = static_cast<int64_t>(tokens.size());
    if (T == 0) fail("decoder", "forward called with no tokens");
    check_tokens(tokens.data(), T);
    reserve(n_past + T);

    const int64_t d = c.d_model;
    std::vector<float> logits(static_cast<size_t>((all_logits ? T : 1) * c.vocab));
    for (int64_t t0 = 0; t0 < T; t0 += opt.prefill_chunk) {
      const int64_t n = std::min(opt.prefill_chunk, T - t0);
      const Segment seg{this, 0, n};
      run_layers(ws, std::span<const Segment>(&seg, 1), tokens.data() + t0, n);
      n_past += n;
      // The final norm and the head for the rows whose logits are wanted: every row of the
      // chunk, or the prompt's last one.
      const int64_t first = all_logits ? 0 : (t0 + n == T ? n - 1 : n);
      if (first == n) continue;
      grow(ws.logits_in, (n - first) * d);
      rmsnorm_forward(ws.x.data() + first * d, out_norm.data(), n - first, d, c.rms_eps, ws.logits_in.data(),
                      ws.rstd.data(), ws.pool);
      float* out = logits.data() + (all_logits ? t0 + first : 0) * c.vocab;
      const WeightHandle head = engine.output_handle();
      engine.forward(head, ws.logits_in.data(), n - first, out, opt.precision);
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
std::vector<float> Decoder::forward_tree(std::span<const int32_t> tokens, std::span<const int32_t> parent) {
  return impl_->forward_tree(tokens, parent);
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

DecodeBatch::DecodeBatch(FrozenEngine& engine, int threads)
    : engine_(engine), ws_(std::make_unique<DecoderWorkspace>(threads > 0 ? threads : engine.threads())) {}
DecodeBatch::~DecodeBatch() = default;

std::vector<float> DecodeBatch::step(std::span<Decoder* const> sequences, std::span<const int32_t> tokens) {
  using Impl = Decoder::Impl;
  const int64_t n = static_cast<int64_t>(sequences.size());
  if (n == 0) fail("decode batch", "a step needs at least one sequence");
  if (tokens.size() != sequences.size())
    fail("decode batch", std::to_string(n) + " sequences but " + std::to_string(tokens.size()) + " tokens",
         "give one token per sequence");
  for (int64_t i = 0; i < n; ++i)
    if (!sequences[static_cast<size_t>(i)]) fail("decode batch", "sequence " + std::to_string(i) + " is null");
  const Impl& s0 = *sequences[0]->impl_;
  std::vector<Impl::Segment> segs;
  segs.reserve(sequences.size());
  for (int64_t i = 0; i < n; ++i) {
    const std::string which = "sequence " + std::to_string(i);
    Impl& s = *sequences[static_cast<size_t>(i)]->impl_;
    if (&s.engine != &engine_)
      fail("decode batch", which + "'s decoder is on another engine", "batch decoders that share the batch's engine");
    if (&s.model != &s0.model) fail("decode batch", which + " is on another model than sequence 0");
    if (s.opt.precision != s0.opt.precision)
      fail("decode batch", which + "'s products run in another mode than sequence 0's",
           "batch decoders made with the same precision");
    for (int64_t j = 0; j < i; ++j)
      if (sequences[static_cast<size_t>(j)] == sequences[static_cast<size_t>(i)])
        fail("decode batch", which + " is sequence " + std::to_string(j) + " again", "give each decoder once per step");
    s.check_tokens(&tokens[static_cast<size_t>(i)], 1);
    segs.push_back({&s, i, 1});
  }
  for (const Impl::Segment& s : segs) s.seq->reserve(s.seq->n_past + 1);

  DecoderWorkspace& w = *ws_;
  Impl::run_layers(w, segs, tokens.data(), n);
  for (const Impl::Segment& s : segs) s.seq->n_past += 1;
  // The final norm and the output head on every row, in the mode of one decoder's step.
  const ModelConfig& c = s0.c;
  grow(w.logits_in, n * c.d_model);
  rmsnorm_forward(w.x.data(), s0.out_norm.data(), n, c.d_model, c.rms_eps, w.logits_in.data(), w.rstd.data(), w.pool);
  std::vector<float> logits(static_cast<size_t>(n * c.vocab));
  const WeightHandle head = engine_.output_handle();
  engine_.forward(head, w.logits_in.data(), n, logits.data(), s0.opt.precision);
  return logits;
}

int DecodeBatch::threads() const { return ws_->pool.size(); }

}  // namespace nl
