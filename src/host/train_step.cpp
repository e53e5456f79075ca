// The host training step: explicit forward and backward of the decoder, llm.c style.
//
// Schedule of forward_backward:
//  1. forward, block by block, keeping only each block's input (the checkpoints);
//  2. loss over the supervised positions in chunks of `loss_chunk` rows: final RMSNorm,
//     output head (engine forward), log-softmax + NLL, and straight back through the head
//     (engine input grad) and the final norm into the gradient of the last block's output;
//  3. for each block from the last: recompute its forward from the checkpoint (the frozen
//     products go through the engine again, all but the down projection: backward never
//     reads its output), then back-propagate through it, adding the LoRA gradients into
//     `grads` (block 0 stops once its adapters have their gradients: its input gradient
//     would only reach the frozen embedding).
// Frozen products are submitted to the engine asynchronously while the host computes the
// LoRA branch of the same projection (on StepOptions::host_threads threads: the core-sharing
// policy). All buffers belong to one memory plan (memory_plan.h): one arena sized from the
// model shapes, the largest batch and the rank, allocated once and carved into the
// StepBuffers spans, so a step allocates nothing. Blocks the plan keeps have their own
// activation slot and skip the recompute in backward; the others share the first slot.
// Each step is timed from the inside (timed_engine.h): host categories and engine busy time.
#include "nightlora/host/layer_vectors.h"
#include "nightlora/host/train_step.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <new>
#include <string>

#include "det_rng.h"
#include "nightlora/engine/frozen_engine.h"
#include "nightlora/host/memory_plan.h"
#include "nightlora/host/precision_plan.h"
#include "nightlora/util/thread_pool.h"
#include "nightlora/quant/qtype.h"
#include "nightlora/util/error.h"
#include "ops.h"
#include "step_buffers.h"
#include "timed_engine.h"

namespace nl {
namespace {

using Buf = std::vector<float>;

void zero(float* p, int64_t n) { std::memset(p, 0, static_cast<size_t>(n) * sizeof(float)); }


}  // namespace

struct TrainStep::Impl : StepBuffers {
  const Model& model;
  HostClock clock;      // the host thread's time per category (this step)
  TimedEngine engine;   // the engine, each product timed
  StepOptions opt;
  ModelConfig cfg;
  ThreadPool pool;       // host work while the engine is idle
  ThreadPool side_pool;  // host work overlapping an engine product (the core-sharing policy)
  std::vector<LayerVectors> lv;
  Buf out_norm;
  RopeTable rope;

  // The memory plan: capacities, kept blocks and the arena the StepBuffers spans point into.
  int64_t cap_T = 0, cap_rank = 0, kept = 1;
  // Its start is aligned to a cache line (the spans are multiples of one): threads that write
  // neighbouring columns of one buffer (attention heads) then never share a line.
  struct AlignedFree {
    void operator()(float* p) const { ::operator delete[](p, std::align_val_t(64)); }
  };
  std::unique_ptr<float[], AlignedFree> arena;
  int64_t arena_floats = 0;
  StepTiming timing;  // of the last step
  StepTiming total;   // of every step so far
  std::vector<int32_t> pos, chunk_labels;
  std::vector<double> row_nll;
  std::vector<int64_t> sup;
  // The precision plan of the step being run (null: every product f32), and which product
  // layer_forward is running: the forward pass or the recomputation in backward.
  const PrecisionPlan* active_plan = nullptr;
  FrozenProduct forward_kind = FrozenProduct::Forward;

  Precision mode(int64_t l, Proj p, FrozenProduct k) const {
    return active_plan ? active_plan->at(l, p, k) : Precision::F32;
  }
  Precision head_mode(FrozenProduct k) const {
    if (!active_plan) return Precision::F32;
    return k == FrozenProduct::InputGrad ? active_plan->head_input_grad : active_plan->head_forward;
  }

  Impl(const Model& m, FrozenEngine& e, const StepOptions& o) : model(m), engine(e, clock), opt(o), cfg(m.config), pool(o.threads),
        side_pool(std::max(1, o.host_threads)) {
    if (opt.host_threads < 1) fail("host threads", "must be at least 1");
    if (opt.loss_chunk <= 0) fail("loss_chunk", "must be positive");
    if (cfg.n_kv_head <= 0 || cfg.n_head % cfg.n_kv_head != 0)
      fail(m.source_path, "n_head " + std::to_string(cfg.n_head) + " is not a multiple of n_kv_head " +
                              std::to_string(cfg.n_kv_head));
    if (cfg.head_dim % 2 != 0) fail(m.source_path, "head_dim must be even for RoPE");
    ModelVectors mv = load_model_vectors(m);
    lv = std::move(mv.layers);
    out_norm = std::move(mv.output_norm);
    // With a plan the arena is made now, once; without one at the first batch.
    if (opt.memory) allocate(opt.memory->max_tokens, opt.memory->rank, opt.memory->kept_blocks);
    else kept = std::clamp<int64_t>(opt.keep_blocks, 1, std::max<int64_t>(cfg.n_layer, 1));
    if (opt.precision && opt.precision->n_layer != cfg.n_layer)
      fail("precision plan", "made for " + std::to_string(opt.precision->n_layer) + " layers, the model has " +
                                 std::to_string(cfg.n_layer), "use a plan made for this model");
  }

  // Lays the arena out for T tokens and this rank, keeping `keep` blocks: the one place the
  // step allocates (at construction with a plan, else at the first batch and at a larger one).
  void allocate(int64_t T, int64_t rank, int64_t keep) {
    cap_T = T;
    cap_rank = rank;
    kept = std::clamp<int64_t>(keep, 1, std::max<int64_t>(cfg.n_layer, 1));
    const StepDims dims{T, rank, opt.loss_chunk};
    arena.reset();
    arena_floats = lay_out_step_buffers(cfg, dims, kept, *this, nullptr);
    try {
      arena.reset(new (std::align_val_t(64)) float[static_cast<size_t>(arena_floats)]());
    } catch (const std::bad_alloc&) {
      // The one large allocation of training: say how large and what makes it smaller.
      fail("training step",
           "out of memory: cannot allocate the step's buffers, " +
               std::to_string(static_cast<double>(arena_floats) * sizeof(float) / (1024.0 * 1024.0)) + " MiB for " +
               std::to_string(T) + " tokens per batch with " + std::to_string(kept) + " kept blocks",
           "lower --batch or --seq-len, or give --max-memory a smaller budget (more blocks recomputed)");
    }
    lay_out_step_buffers(cfg, dims, kept, *this, arena.get());
    if (T > rope.max_pos) rope.build(cfg, std::max<int64_t>(T, 64));  // no position exceeds T
    const int64_t C = std::min(opt.loss_chunk, T);
    pos.resize(static_cast<size_t>(T));
    sup.reserve(static_cast<size_t>(T));
    chunk_labels.reserve(static_cast<size_t>(C));
    row_nll.resize(static_cast<size_t>(C));
    reserve_engine_staging(T, C);
  }

  // The engine's f16/int8 staging grows with the tokens of a product: sized here for the
  // modes of the precision plan (f32 products need none), so that warm steps allocate
  // nothing in the engine either. A plan whose modes change later (calibration tries them
  // one by one) grows it at the first larger product instead.
  void reserve_engine_staging(int64_t T, int64_t C) {
    const PrecisionPlan* plan = opt.precision;
    if (!plan || plan->n_layer != cfg.n_layer) return;  // no plan, or a mismatch the constructor refuses
    for (int64_t l = 0; l < cfg.n_layer; ++l)
      for (int i = 0; i < kNumProj; ++i) {
        const Proj p = static_cast<Proj>(i);
        const WeightHandle h = engine.handle(l, p);
        engine.reserve_forward(h, T, plan->at(l, p, FrozenProduct::Forward));
        engine.reserve_forward(h, T, plan->at(l, p, FrozenProduct::Recompute));
        engine.reserve_input_grad(h, T, plan->at(l, p, FrozenProduct::InputGrad));
      }
    engine.reserve_forward(engine.output_handle(), C, plan->head_forward);
    engine.reserve_input_grad(engine.output_handle(), C, plan->head_input_grad);
  }

  void plan(int64_t T, int64_t rank) {
    if (T <= cap_T && rank <= cap_rank) return;
    allocate(std::max(cap_T, T), std::max(cap_rank, rank), kept);
  }

  // Blocks from n_layer - kept on keep their activations, each in its own slot; the others
  // are recomputed into slot 0 (free by then: it belongs to the lowest kept block, whose
  // backward runs before any recomputed block's).
  bool kept_block(int64_t l) const { return l >= cfg.n_layer - kept; }
  size_t slot_of(int64_t l) const { return kept_block(l) ? static_cast<size_t>(l - (cfg.n_layer - kept)) : 0; }

  // The LoRA branch, timed as adapter work: the down product overlaps the engine (side pool),
  // the up product follows its wait (all threads).
  void adapter_down(const LoraBranch& b, const float* x, int64_t T, float* zz) {
    HostClock::Scope s(clock, HostClock::Adapter);
    lora_down(b, x, T, zz, side_pool, lora_u.data());
  }
  void adapter_up(const LoraBranch& b, const float* zz, int64_t T, float* y) {
    HostClock::Scope s(clock, HostClock::Adapter);
    lora_up_add(b, zz, T, y, this->pool);
  }

  void validate(const Batch& b, const LoraAdapter& a) const {
    const int64_t T = b.n_tokens();
    if (T == 0) fail("batch", "no tokens");
    if (static_cast<int64_t>(b.labels.size()) != T)
      fail("batch", std::to_string(b.labels.size()) + " labels for " + std::to_string(T) + " tokens");
    if (b.seq_start.size() < 2 || b.seq_start.front() != 0 || b.seq_start.back() != T)
      fail("batch", "seq_start must run from 0 to the token count");
    for (size_t i = 1; i < b.seq_start.size(); ++i)
      if (b.seq_start[i] <= b.seq_start[i - 1]) fail("batch", "empty or unordered sequence " + std::to_string(i - 1));
    for (int64_t t = 0; t < T; ++t)
      if (b.labels[static_cast<size_t>(t)] < -1 || b.labels[static_cast<size_t>(t)] >= cfg.vocab)
        fail("batch label " + std::to_string(t), "label " + std::to_string(b.labels[static_cast<size_t>(t)]) +
                                                     " outside the vocabulary of " + std::to_string(cfg.vocab));
    if (a.n_layer != cfg.n_layer || static_cast<int64_t>(a.pairs.size()) != cfg.n_layer * kNumProj)
      fail("adapter", "made for " + std::to_string(a.n_layer) + " layers, the model has " + std::to_string(cfg.n_layer),
           "use an adapter trained for this model");
    for (int64_t l = 0; l < cfg.n_layer; ++l)
      for (int p = 0; p < kNumProj; ++p) {
        const LoraPair& pr = a.at(l, static_cast<Proj>(p));
        if (!pr.enabled) continue;
        auto [in, out] = proj_shape(cfg, static_cast<Proj>(p));
        if (pr.in != in || pr.out != out || static_cast<int64_t>(pr.A.size()) != a.cfg.rank * in ||
            static_cast<int64_t>(pr.B.size()) != out * a.cfg.rank)
          fail("adapter layer " + std::to_string(l) + " " + proj_name(static_cast<Proj>(p)),
               "shape does not match the model (" + std::to_string(out) + " x " + std::to_string(in) + ", rank " +
                   std::to_string(a.cfg.rank) + ")",
               "use an adapter trained for this model");
      }
  }

  LoraBranch branch(const LoraAdapter& a, int64_t l, Proj p, float dropout, uint64_t seed) const {
    const LoraPair& pr = a.at(l, p);
    LoraBranch b{};
    b.A = pr.A.data();
    b.B = pr.B.data();
    b.rank = a.cfg.rank;
    b.in = pr.in;
    b.out = pr.out;
    b.scale = a.cfg.scale();
    b.dropout = dropout;
    b.dropout_key = hash_combine(hash_combine(seed, static_cast<uint64_t>(l)), static_cast<uint64_t>(p));
    return b;
  }

  // Forward of block l from x_in; keeps every activation backward needs in the layer
  // buffers, and writes the block output to x_out when given. When recomputing
  // (forward_kind == Recompute) it stops once those activations are made: see the MLP.
  void layer_forward(int64_t l, const float* x_in, int64_t T, const AttnShape& as, const LoraAdapter& a, float dropout,
                     uint64_t seed, float* x_out) {
    bind(slot_of(l));
    const LayerVectors& w = lv[static_cast<size_t>(l)];
    const int64_t d = cfg.d_model, qd = cfg.q_dim(), kvd = cfg.kv_dim(), ff = cfg.d_ff, hd = cfg.head_dim;
    auto en = [&](Proj p) { return a.at(l, p).enabled; };
    auto br = [&](Proj p) { return branch(a, l, p, dropout, seed); };
    auto zp = [&](Proj p) { return z[static_cast<int>(p)].data(); };

    rmsnorm_forward(x_in, w.attn_norm.data(), T, d, cfg.rms_eps, xn.data(), rstd1.data(), pool);
    float* qdst = cfg.qk_norm ? q_lin.data() : q.data();
    float* kdst = cfg.qk_norm ? k_lin.data() : k.data();
    const FrozenProduct fk = forward_kind;
    engine.submit_forward(engine.handle(l, Proj::Q), xn.data(), T, qdst, mode(l, Proj::Q, fk));
    engine.submit_forward(engine.handle(l, Proj::K), xn.data(), T, kdst, mode(l, Proj::K, fk));
    EngineTicket tv = engine.submit_forward(engine.handle(l, Proj::V), xn.data(), T, v.data(), mode(l, Proj::V, fk));
    for (Proj p : {Proj::Q, Proj::K, Proj::V})
      if (en(p)) adapter_down(br(p), xn.data(), T, zp(p));
    engine.wait(tv);
    float* dsts[3] = {qdst, kdst, v.data()};
    const Buf* bias[3] = {&w.bq, &w.bk, &w.bv};
    for (int i = 0; i < 3; ++i) {
      const Proj p = static_cast<Proj>(i);
      const int64_t n = i == 0 ? qd : kvd;
      if (cfg.qkv_bias) add_bias(dsts[i], bias[i]->data(), T, n);
      if (en(p)) adapter_up(br(p), zp(p), T, dsts[i]);
    }
    if (cfg.qk_norm) {
      rmsnorm_forward(q_lin.data(), w.q_norm.data(), T * cfg.n_head, hd, cfg.rms_eps, q.data(), rstd_q.data(), pool);
      rmsnorm_forward(k_lin.data(), w.k_norm.data(), T * cfg.n_kv_head, hd, cfg.rms_eps, k.data(), rstd_k.data(), pool);
    }
    rope_forward(q.data(), T, cfg.n_head, pos.data(), rope, pool);
    rope_forward(k.data(), T, cfg.n_kv_head, pos.data(), rope, pool);
    {
      HostClock::Scope s(clock, HostClock::Attention);
      attention_forward(as, q.data(), k.data(), v.data(), att.data(), lse.data(), pool);
    }

    EngineTicket to = engine.submit_forward(engine.handle(l, Proj::O), att.data(), T, o_out.data(), mode(l, Proj::O, fk));
    if (en(Proj::O)) adapter_down(br(Proj::O), att.data(), T, zp(Proj::O));
    engine.wait(to);
    if (en(Proj::O)) adapter_up(br(Proj::O), zp(Proj::O), T, o_out.data());
    for (int64_t i = 0; i < T * d; ++i) x1[static_cast<size_t>(i)] = x_in[i] + o_out[static_cast<size_t>(i)];

    rmsnorm_forward(x1.data(), w.ffn_norm.data(), T, d, cfg.rms_eps, xn2.data(), rstd2.data(), pool);
    engine.submit_forward(engine.handle(l, Proj::Gate), xn2.data(), T, g.data(), mode(l, Proj::Gate, fk));
    EngineTicket tu = engine.submit_forward(engine.handle(l, Proj::Up), xn2.data(), T, u.data(), mode(l, Proj::Up, fk));
    for (Proj p : {Proj::Gate, Proj::Up})
      if (en(p)) adapter_down(br(p), xn2.data(), T, zp(p));
    engine.wait(tu);
    if (en(Proj::Gate)) adapter_up(br(Proj::Gate), zp(Proj::Gate), T, g.data());
    if (en(Proj::Up)) adapter_up(br(Proj::Up), zp(Proj::Up), T, u.data());
    if (fk == FrozenProduct::Recompute) {
      // Backward reads neither the down projection's output (its gradient dh comes from the
      // block's output gradient alone) nor, without a LoRA branch there, its input h
      // (swiglu_backward uses g and u). So a recomputed block skips the frozen down product
      // and keeps only what the branch's parameter gradients need: h and z = dropout(h)·Aᵀ,
      // made on every host thread since the engine is idle.
      if (en(Proj::Down)) {
        swiglu_forward(g.data(), u.data(), h.data(), T * ff, pool);
        HostClock::Scope s(clock, HostClock::Adapter);
        lora_down(br(Proj::Down), h.data(), T, zp(Proj::Down), pool, lora_u.data());
      }
      return;
    }
    swiglu_forward(g.data(), u.data(), h.data(), T * ff, pool);

    EngineTicket td = engine.submit_forward(engine.handle(l, Proj::Down), h.data(), T, d_out.data(), mode(l, Proj::Down, fk));
    if (en(Proj::Down)) adapter_down(br(Proj::Down), h.data(), T, zp(Proj::Down));
    engine.wait(td);
    if (en(Proj::Down)) adapter_up(br(Proj::Down), zp(Proj::Down), T, d_out.data());
    if (x_out)
      for (int64_t i = 0; i < T * d; ++i) x_out[i] = x1[static_cast<size_t>(i)] + d_out[static_cast<size_t>(i)];
  }

  // Backward of block l (its activations must be in the layer buffers): on entry dx holds
  // the gradient of the block output, on return the gradient of its input (except for block
  // 0, whose input gradient nothing reads).
  void layer_backward(int64_t l, const float* x_in, int64_t T, const AttnShape& as, const LoraAdapter& a,
                      LoraAdapter& grads, float dropout, uint64_t seed) {
    bind(slot_of(l));
    const LayerVectors& w = lv[static_cast<size_t>(l)];
    const int64_t d = cfg.d_model, qd = cfg.q_dim(), kvd = cfg.kv_dim(), ff = cfg.d_ff, hd = cfg.head_dim;
    auto en = [&](Proj p) { return a.at(l, p).enabled; };
    auto br = [&](Proj p) { return branch(a, l, p, dropout, seed); };
    // LoRA parameter gradients (overlapping the engine), then the input-gradient half.
    auto lora_params = [&](Proj p, const float* x, const float* dy, ThreadPool* on = nullptr) {
      if (!en(p)) return;
      HostClock::Scope s(clock, HostClock::Adapter);
      LoraPair& gp = grads.at(l, p);
      lora_backward_params(br(p), x, z[static_cast<int>(p)].data(), dy, T, gp.A.data(), gp.B.data(), lora_u.data(),
                           dz[static_cast<int>(p)].data(), on ? *on : side_pool);
    };
    auto lora_input = [&](Proj p, float* dxin) {
      if (!en(p)) return;
      HostClock::Scope s(clock, HostClock::Adapter);
      lora_backward_input(br(p), dz[static_cast<int>(p)].data(), T, dxin, pool);
    };

    // MLP: x2 = x1 + down(h), h = silu(gate(xn2))·up(xn2), xn2 = norm(x1)
    EngineTicket t = engine.submit_input_grad(engine.handle(l, Proj::Down), dx.data(), T, dh.data(), mode(l, Proj::Down, FrozenProduct::InputGrad));
    lora_params(Proj::Down, h.data(), dx.data());
    engine.wait(t);
    lora_input(Proj::Down, dh.data());
    swiglu_backward(dh.data(), g.data(), u.data(), dg.data(), du.data(), T * ff, pool);
    engine.submit_input_grad(engine.handle(l, Proj::Gate), dg.data(), T, dxn.data(), mode(l, Proj::Gate, FrozenProduct::InputGrad));
    t = engine.submit_input_grad(engine.handle(l, Proj::Up), du.data(), T, tmp1.data(), mode(l, Proj::Up, FrozenProduct::InputGrad));
    lora_params(Proj::Gate, xn2.data(), dg.data());
    lora_params(Proj::Up, xn2.data(), du.data());
    engine.wait(t);
    add_inplace(dxn.data(), tmp1.data(), T * d);
    lora_input(Proj::Gate, dxn.data());
    lora_input(Proj::Up, dxn.data());
    rmsnorm_backward(dxn.data(), x1.data(), w.ffn_norm.data(), rstd2.data(), T, d, dx.data(), pool);  // dx = dx1

    // Attention: x1 = x + o(att), att = attention(rope(q), rope(k), v)
    t = engine.submit_input_grad(engine.handle(l, Proj::O), dx.data(), T, datt.data(), mode(l, Proj::O, FrozenProduct::InputGrad));
    lora_params(Proj::O, att.data(), dx.data());
    engine.wait(t);
    lora_input(Proj::O, datt.data());
    {
      HostClock::Scope s(clock, HostClock::Attention);
      attention_backward(as, datt.data(), q.data(), k.data(), v.data(), att.data(), lse.data(), dq.data(), dk.data(),
                         dv.data(), pool);
    }
    rope_backward(dq.data(), T, cfg.n_head, pos.data(), rope, pool);
    rope_backward(dk.data(), T, cfg.n_kv_head, pos.data(), rope, pool);
    float* dq_in = dq.data();
    float* dk_in = dk.data();
    if (cfg.qk_norm) {
      zero(dq_lin.data(), T * qd);
      zero(dk_lin.data(), T * kvd);
      rmsnorm_backward(dq.data(), q_lin.data(), w.q_norm.data(), rstd_q.data(), T * cfg.n_head, hd, dq_lin.data(), pool);
      rmsnorm_backward(dk.data(), k_lin.data(), w.k_norm.data(), rstd_k.data(), T * cfg.n_kv_head, hd, dk_lin.data(),
                       pool);
      dq_in = dq_lin.data();
      dk_in = dk_lin.data();
    }
    if (l == 0) {
      // The first block's input gradient would only reach the frozen embedding: its three
      // frozen input-gradient products are skipped, and the adapters' own gradients use every
      // host thread (the engine is idle).
      lora_params(Proj::Q, xn.data(), dq_in, &pool);
      lora_params(Proj::K, xn.data(), dk_in, &pool);
      lora_params(Proj::V, xn.data(), dv.data(), &pool);
      return;
    }
    engine.submit_input_grad(engine.handle(l, Proj::Q), dq_in, T, dxn.data(), mode(l, Proj::Q, FrozenProduct::InputGrad));
    engine.submit_input_grad(engine.handle(l, Proj::K), dk_in, T, tmp1.data(), mode(l, Proj::K, FrozenProduct::InputGrad));
    t = engine.submit_input_grad(engine.handle(l, Proj::V), dv.data(), T, tmp2.data(), mode(l, Proj::V, FrozenProduct::InputGrad));
    lora_params(Proj::Q, xn.data(), dq_in);
    lora_params(Proj::K, xn.data(), dk_in);
    lora_params(Proj::V, xn.data(), dv.data());
    engine.wait(t);
    add_inplace(dxn.data(), tmp1.data(), T * d);
    add_inplace(dxn.data(), tmp2.data(), T * d);
    for (Proj p : {Proj::Q, Proj::K, Proj::V}) lora_input(p, dxn.data());
    rmsnorm_backward(dxn.data(), x_in, w.attn_norm.data(), rstd1.data(), T, d, dx.data(), pool);  // dx = dx_in
  }

  // Loss over supervised positions, in chunks through the final norm and the output head.
  // With `backward`, also writes d(loss_scale·loss)/d(final block output) into dx.
  StepResult loss(const Batch& b, const float* x_final, bool backward, float loss_scale) {
    const int64_t T = b.n_tokens(), d = cfg.d_model, V = cfg.vocab;
    sup.clear();
    for (int64_t t = 0; t < T; ++t)
      if (b.labels[static_cast<size_t>(t)] >= 0) sup.push_back(t);
    if (backward) zero(dx.data(), T * d);
    StepResult r;
    r.n_supervised = static_cast<int64_t>(sup.size());
    const WeightHandle head = engine.output_handle();
    for (size_t c0 = 0; c0 < sup.size(); c0 += static_cast<size_t>(opt.loss_chunk)) {
      const int64_t C = std::min<int64_t>(opt.loss_chunk, static_cast<int64_t>(sup.size() - c0));
      chunk_labels.resize(static_cast<size_t>(C));
      for (int64_t i = 0; i < C; ++i) {
        const int64_t t = sup[c0 + static_cast<size_t>(i)];
        std::memcpy(lx.data() + i * d, x_final + t * d, static_cast<size_t>(d) * sizeof(float));
        chunk_labels[static_cast<size_t>(i)] = b.labels[static_cast<size_t>(t)];
      }
      rmsnorm_forward(lx.data(), out_norm.data(), C, d, cfg.rms_eps, lxn.data(), lrstd.data(), pool);
      engine.forward(head, lxn.data(), C, logits.data(), head_mode(FrozenProduct::Forward));
      cross_entropy_chunk(logits.data(), chunk_labels.data(), C, V, loss_scale, row_nll.data(), pool);
      for (int64_t i = 0; i < C; ++i) r.loss_sum += row_nll[static_cast<size_t>(i)];
      if (!backward) continue;
      engine.input_grad(head, logits.data(), C, ldxn.data(), head_mode(FrozenProduct::InputGrad));
      zero(ldx.data(), C * d);
      rmsnorm_backward(ldxn.data(), lx.data(), out_norm.data(), lrstd.data(), C, d, ldx.data(), pool);
      for (int64_t i = 0; i < C; ++i)
        add_inplace(dx.data() + sup[c0 + static_cast<size_t>(i)] * d, ldx.data() + i * d, d);
    }
    return r;
  }

  StepResult run(const Batch& b, const LoraAdapter& a, LoraAdapter* grads, float loss_scale, uint64_t seed) {
    validate(b, a);
    if (grads) {
      if (grads->pairs.size() != a.pairs.size()) fail("gradients", "shape differs from the adapter", "use zeros_like()");
      for (size_t i = 0; i < a.pairs.size(); ++i)
        if (grads->pairs[i].A.size() != a.pairs[i].A.size() || grads->pairs[i].B.size() != a.pairs[i].B.size())
          fail("gradients", "shape differs from the adapter", "use zeros_like()");
    }
    const int64_t T = b.n_tokens(), d = cfg.d_model;
    plan(T, a.cfg.rank);
    for (int64_t s = 0; s < b.n_seqs(); ++s)
      for (int64_t t = b.seq_start[static_cast<size_t>(s)]; t < b.seq_start[static_cast<size_t>(s + 1)]; ++t)
        pos[static_cast<size_t>(t)] = static_cast<int32_t>(t - b.seq_start[static_cast<size_t>(s)]);
    const AttnShape as{T, cfg.n_head, cfg.n_kv_head, cfg.head_dim, b.seq_start.data(), b.n_seqs(), attn_scratch.data()};
    const float dropout = grads ? a.cfg.dropout : 0.0f;
    // The plan applies to training steps; validation (forward only) measures the adapter in f32.
    active_plan = grads ? opt.precision : nullptr;
    forward_kind = FrozenProduct::Forward;

    embedding_forward(model.weights.tok_embd, b.tokens.data(), T, ckpt.data(), pool);
    for (int64_t l = 0; l < cfg.n_layer; ++l)
      layer_forward(l, ckpt.data() + l * T * d, T, as, a, dropout, seed, ckpt.data() + (l + 1) * T * d);
    StepResult r = loss(b, ckpt.data() + cfg.n_layer * T * d, grads != nullptr, loss_scale);
    if (!grads || r.n_supervised == 0) return r;
    for (int64_t l = cfg.n_layer - 1; l >= 0; --l) {
      const float* x_in = ckpt.data() + l * T * d;
      // Kept blocks still hold their activations from the forward pass (the loss uses its
      // own buffers); every other block is recomputed.
      if (!kept_block(l)) {
        forward_kind = FrozenProduct::Recompute;
        engine.set_recomputing(true);
        layer_forward(l, x_in, T, as, a, dropout, seed, nullptr);
        forward_kind = FrozenProduct::Forward;
        engine.set_recomputing(false);
      }
      layer_backward(l, x_in, T, as, a, *grads, dropout, seed);
    }
    return r;
  }

  // run() with the breakdown: host categories from the clock, engine busy time per kind.
  StepResult timed_run(const Batch& b, const LoraAdapter& a, LoraAdapter* grads, float loss_scale, uint64_t seed) {
    engine.reset();
    engine.set_recomputing(false);
    // The wall time spans exactly what the host clock charges, so the categories partition
    // it even on a busy machine: it starts after reset() (which waits for earlier stamps)
    // and ends after collect() (which waits for the monitor's last stamps, charged as
    // Other), so every product's busy interval lies inside it too.
    const auto t0 = std::chrono::steady_clock::now();
    clock.start();
    const StepResult r = run(b, a, grads, loss_scale, seed);
    clock.switch_to(HostClock::Other);
    timing = StepTiming{};
    engine.collect(timing);
    clock.switch_to(HostClock::Other);
    const auto t1 = std::chrono::steady_clock::now();
    timing.adapter_s = clock.seconds(HostClock::Adapter);
    timing.attention_s = clock.seconds(HostClock::Attention);
    timing.other_s = clock.seconds(HostClock::Other);
    timing.wait_s = clock.seconds(HostClock::Wait);
    timing.wall_s = std::chrono::duration<double>(t1 - t0).count();
    total += timing;
    return r;
  }
};

TrainStep::TrainStep(const Model& model, FrozenEngine& engine, const StepOptions& opt)
    : impl_(std::make_unique<Impl>(model, engine, opt)) {}
TrainStep::~TrainStep() = default;

StepResult TrainStep::forward_backward(const Batch& batch, const LoraAdapter& adapter, LoraAdapter& grads,
                                       float loss_scale, uint64_t dropout_seed) {
  return impl_->timed_run(batch, adapter, &grads, loss_scale, dropout_seed);
}

StepResult TrainStep::forward_only(const Batch& batch, const LoraAdapter& adapter) {
  return impl_->timed_run(batch, adapter, nullptr, 1.0f, 0);
}

const StepTiming& TrainStep::last_timing() const { return impl_->timing; }
const StepTiming& TrainStep::total_timing() const { return impl_->total; }
size_t TrainStep::arena_bytes() const { return static_cast<size_t>(impl_->arena_floats) * sizeof(float); }
int64_t TrainStep::kept_blocks() const { return impl_->kept; }

}  // namespace nl
