// Per-example held-out loss (see heldout_loss.h): the training step's forward pass, made for
// evaluation. The block below is TrainStep's layer_forward (src/host/train_step.cpp) in its
// forward-only form, op for op and in the same order, so in f32 every example's loss is the
// very number training computes for it: the gate judges an adapter by the objective it was
// trained on. What evaluation does not need is left out:
//  - no block inputs are kept (one residual stream, updated in place) and no buffer of
//    backward, the adapter's gradients or the optimizer exists;
//  - examples are packed several to a forward (each attends only to itself), in data-set
//    order; an example with no supervised token is not run at all (its loss is 0 of 0);
//  - in the last block only the supervised rows go on after attention (the output
//    projection, the MLP and the output head run on them alone): nothing reads the others;
//  - the tokens every scored example starts with (a task's instruction: LaMP-2's prompt
//    head), up to the first supervised position, run once per adapter: their keys and
//    values are kept for every layer, and each example's own rows attend to them and to
//    themselves (its keys copied after the prefix's; attention_forward's q_start). A row's
//    numbers depend only on the rows before it in its sequence, the same in the prefix's
//    forward.
// Each output row of the engine's products, the norms, the LoRA branch and the loss depends
// only on its own input row, so neither packing nor the last block's row selection changes
// a number (tests/eval/heldout_loss_test.cpp compares with TrainStep::forward_only example
// by example, bit for bit).
#include "nightlora/host/layer_vectors.h"
#include "nightlora/eval/heldout_loss.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <new>
#include <string>

#include "host/ops.h"
#include "nightlora/data/batcher.h"
#include "nightlora/util/error.h"
#include "nightlora/util/thread_pool.h"

namespace nl {

double HeldoutLoss::mean() const {
  double sum = 0;
  int64_t n = 0;
  for (const ExampleLoss& e : examples) {
    sum += e.loss_sum;
    n += e.n_supervised;
  }
  return n > 0 ? sum / static_cast<double>(n) : 0.0;
}

bool HeldoutLoss::finite() const {
  return std::all_of(examples.begin(), examples.end(), [](const ExampleLoss& e) { return std::isfinite(e.loss_sum); });
}

namespace {

using Buf = std::vector<float>;


// The batch less the first p tokens of every sequence (the shared prefix, run apart).
void drop_prefix(Batch& b, int64_t p) {
  if (p == 0) return;
  Batch out;
  out.seq_start.push_back(0);
  for (int64_t s = 0; s < b.n_seqs(); ++s) {
    for (int64_t t = b.seq_start[static_cast<size_t>(s)] + p; t < b.seq_start[static_cast<size_t>(s + 1)]; ++t) {
      out.tokens.push_back(b.tokens[static_cast<size_t>(t)]);
      out.labels.push_back(b.labels[static_cast<size_t>(t)]);
    }
    out.seq_start.push_back(out.n_tokens());
  }
  b = std::move(out);
}

// The number of leading tokens that the scored examples share and none of them is scored
// on: the common token prefix, cut before the first supervised position of each (label
// position f - 1 for the first supervised token f). 0 with fewer than two examples.
int64_t shared_prefix(const std::vector<Example>& examples, const std::vector<int64_t>& scored) {
  if (scored.size() < 2) return 0;
  const std::vector<int32_t>& first = examples[static_cast<size_t>(scored[0])].tokens;
  int64_t p = static_cast<int64_t>(first.size());
  for (int64_t i : scored) {
    const Example& e = examples[static_cast<size_t>(i)];
    int64_t n = 0;
    const int64_t len = std::min<int64_t>(p, static_cast<int64_t>(e.tokens.size()));
    while (n < len && e.tokens[static_cast<size_t>(n)] == first[static_cast<size_t>(n)]) ++n;
    int64_t f = 1;  // token 0 is never predicted
    while (f < static_cast<int64_t>(e.tokens.size()) && !e.supervised[static_cast<size_t>(f)]) ++f;
    p = std::min(n, f - 1);
  }
  return std::max<int64_t>(p, 0);
}

// Rows [0, n) of `rows` gathered from src (row length w) into dst.
void gather_rows(const float* src, const std::vector<int64_t>& rows, int64_t w, float* dst) {
  for (size_t i = 0; i < rows.size(); ++i)
    std::memcpy(dst + static_cast<int64_t>(i) * w, src + rows[i] * w, static_cast<size_t>(w) * sizeof(float));
}

}  // namespace

struct HeldoutScorer::Impl {
  const Model& model;
  ModelConfig cfg;
  HeldoutOptions opt;
  std::unique_ptr<FrozenEngine> own_engine;
  FrozenEngine* engine = nullptr;  // own_engine, or a borrowed one
  ThreadPool pool;       // host work while the engine is idle
  ThreadPool side_pool;  // the LoRA branch while an engine product is in flight (one thread, as in training)
  std::vector<LayerVectors> lv;
  Buf out_norm;
  RopeTable rope;

  // Forward buffers for cap_T tokens (the largest packed batch so far) and rank cap_rank.
  int64_t cap_T = 0, cap_rank = 0;
  Buf x, xn, rstd, q_lin, k_lin, q, k, v, rstd_q, rstd_k, att, lse, o, g, u, h, dn;
  // The attention scratch, for cap_keys key rows of a forward.
  int64_t cap_keys = 0;
  Buf attn_scratch;
  // The shared prefix of the examples being scored: its length and each layer's keys and
  // values (after RoPE), made by run_prefix for the adapter being scored. Each layer's
  // buffer has room after the prefix for the longest example's own rows: a sequence's keys
  // are copied there, after the prefix's, for its attention.
  int64_t prefix = 0;
  std::vector<Buf> prefix_k, prefix_v;
  Buf z[kNumProj];
  // The last block's supervised rows, gathered.
  Buf sx, satt;
  // Loss chunk.
  Buf lx, lxn, lrstd, logits;
  std::vector<double> row_nll;
  std::vector<int32_t> pos, chunk_labels;
  std::vector<int64_t> sup;  // supervised positions of the batch

  Impl(const Model& m, const HeldoutOptions& o, FrozenEngine* borrowed)
      : model(m), cfg(m.config), opt(o), pool(o.threads), side_pool(1) {
    if (opt.max_batch_tokens < 1) fail("held-out loss", "max_batch_tokens must be at least 1");
    if (opt.loss_chunk < 1) fail("held-out loss", "loss_chunk must be at least 1");
    if (cfg.n_kv_head <= 0 || cfg.n_head % cfg.n_kv_head != 0)
      fail(m.source_path, "n_head " + std::to_string(cfg.n_head) + " is not a multiple of n_kv_head " +
                              std::to_string(cfg.n_kv_head));
    if (cfg.head_dim % 2 != 0) fail(m.source_path, "head_dim must be even for RoPE");
    if (borrowed) {
      engine = borrowed;
    } else {
      EngineOptions eo;
      eo.threads = opt.threads;
      // One thread asked for: the products run on it when it waits (after the LoRA branches'
      // down products) rather than on the engine's dispatcher beside it, which saves two
      // thread wake-ups per product and keeps the work on the one core (the same numbers).
      eo.waiter_runs_products = opt.threads == 1;
      own_engine = make_engine(model, eo);
      engine = own_engine.get();
    }
    const int64_t d = cfg.d_model;
    ModelVectors mv = load_model_vectors(m);
    lv = std::move(mv.layers);
    out_norm = std::move(mv.output_norm);
    const int64_t C = opt.loss_chunk;
    lx.resize(static_cast<size_t>(C * d));
    lxn.resize(static_cast<size_t>(C * d));
    lrstd.resize(static_cast<size_t>(C));
    logits.resize(static_cast<size_t>(C * cfg.vocab));
    row_nll.resize(static_cast<size_t>(C));
    chunk_labels.reserve(static_cast<size_t>(C));
    engine->reserve_forward(engine->output_handle(), C, opt.precision);
  }

  // Buffers for T tokens and this rank (grown, never shrunk).
  void plan(int64_t T, int64_t rank) {
    if (T > cap_T) {
      cap_T = T;
      const int64_t d = cfg.d_model, qd = cfg.q_dim(), kvd = cfg.kv_dim(), ff = cfg.d_ff;
      auto size = [&](Buf& b, int64_t n) { b.assign(static_cast<size_t>(n), 0.0f); };
      for (Buf* b : {&x, &xn, &o, &dn, &sx}) size(*b, T * d);
      size(rstd, T);
      for (Buf* b : {&q, &att, &satt}) size(*b, T * qd);
      size(k, T * kvd);
      size(v, T * kvd);
      size(q_lin, cfg.qk_norm ? T * qd : 0);
      size(k_lin, cfg.qk_norm ? T * kvd : 0);
      size(rstd_q, cfg.qk_norm ? T * cfg.n_head : 0);
      size(rstd_k, cfg.qk_norm ? T * cfg.n_kv_head : 0);
      size(lse, T * cfg.n_head);
      for (Buf* b : {&g, &u, &h}) size(*b, T * ff);
      pos.resize(static_cast<size_t>(T));
      sup.reserve(static_cast<size_t>(T));
      for (int64_t l = 0; l < cfg.n_layer; ++l)
        for (int i = 0; i < kNumProj; ++i) engine->reserve_forward(engine->handle(l, static_cast<Proj>(i)), T, opt.precision);
      cap_rank = 0;  // z is sized by T too
    }
    if (rank > cap_rank) {
      cap_rank = rank;
      for (Buf& b : z) b.assign(static_cast<size_t>(cap_T * rank), 0.0f);
    }
  }

  // Attention scratch for `keys` key rows, and RoPE for positions below `positions`.
  void plan_attention(int64_t keys, int64_t positions) {
    if (keys > cap_keys) {
      cap_keys = keys;
      attn_scratch.assign(static_cast<size_t>(attn_scratch_floats(cfg.n_head, keys, cfg.head_dim)), 0.0f);
    }
    if (positions > rope.max_pos) rope.build(cfg, std::max<int64_t>(positions, 64));
  }

  void validate(const LoraAdapter& a) const {
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

  // The adapter's branch on (l, p), or null when it has none there.
  bool branch(const LoraAdapter* a, int64_t l, Proj p, LoraBranch& b) const {
    if (!a || !a->at(l, p).enabled) return false;
    const LoraPair& pr = a->at(l, p);
    b = LoraBranch{};
    b.A = pr.A.data();
    b.B = pr.B.data();
    b.rank = a->cfg.rank;
    b.in = pr.in;
    b.out = pr.out;
    b.scale = a->cfg.scale();
    b.dropout = 0.0f;
    return true;
  }

  // y = engine(x)·Wᵀ (+ the LoRA branch), for the projections in `ps` that read the same x:
  // the frozen products are submitted first, the branches' down products run while they
  // are in flight, then the biases and the up products, as in training.
  void project(int64_t l, const LoraAdapter* a, const float* xin, int64_t T, std::initializer_list<Proj> ps,
               std::initializer_list<float*> ys, std::initializer_list<const Buf*> biases) {
    EngineTicket last = 0;
    auto y = ys.begin();
    for (Proj p : ps) last = engine->submit_forward(engine->handle(l, p), xin, T, *y++, opt.precision);
    LoraBranch b;
    for (Proj p : ps)
      if (branch(a, l, p, b)) lora_down(b, xin, T, z[static_cast<int>(p)].data(), side_pool);
    engine->wait(last);
    y = ys.begin();
    auto bias = biases.begin();
    for (Proj p : ps) {
      const int64_t n = proj_shape(cfg, p).second;
      if (bias != biases.end() && *bias && !(*bias)->empty()) add_bias(*y, (*bias)->data(), T, n);
      if (branch(a, l, p, b)) lora_up_add(b, z[static_cast<int>(p)].data(), T, *y, pool);
      ++y;
      if (bias != biases.end()) ++bias;
    }
  }

  // What a forward runs: T rows of the residual stream x attending as `as` says, and how
  // they stand to the shared prefix.
  enum class Rows {
    Whole,          // whole examples
    Prefix,         // the shared prefix alone: keep each layer's keys and values, stop the
                    // last block there (nothing reads its queries)
    AfterPrefix,    // the examples' own rows after the prefix: they attend to its keys too
  };

  // Block l on the residual stream x (T rows), in place. In the last block, only the rows
  // in `sup` continue after attention: on return the first sup.size() rows of sx hold them.
  void layer_forward(int64_t l, int64_t T, const AttnShape& as, const LoraAdapter* a, Rows rows) {
    const LayerVectors& w = lv[static_cast<size_t>(l)];
    const int64_t d = cfg.d_model, qd = cfg.q_dim(), hd = cfg.head_dim;
    const bool last = l == cfg.n_layer - 1;

    rmsnorm_forward(x.data(), w.attn_norm.data(), T, d, cfg.rms_eps, xn.data(), rstd.data(), pool);
    float* qdst = cfg.qk_norm ? q_lin.data() : q.data();
    float* kdst = cfg.qk_norm ? k_lin.data() : k.data();
    project(l, a, xn.data(), T, {Proj::Q, Proj::K, Proj::V}, {qdst, kdst, v.data()}, {&w.bq, &w.bk, &w.bv});
    if (cfg.qk_norm) {
      rmsnorm_forward(q_lin.data(), w.q_norm.data(), T * cfg.n_head, hd, cfg.rms_eps, q.data(), rstd_q.data(), pool);
      rmsnorm_forward(k_lin.data(), w.k_norm.data(), T * cfg.n_kv_head, hd, cfg.rms_eps, k.data(), rstd_k.data(), pool);
    }
    rope_forward(q.data(), T, cfg.n_head, pos.data(), rope, pool);
    rope_forward(k.data(), T, cfg.n_kv_head, pos.data(), rope, pool);
    if (rows == Rows::Prefix) {
      const size_t n = static_cast<size_t>(T * cfg.kv_dim());
      std::memcpy(prefix_k[static_cast<size_t>(l)].data(), k.data(), n * sizeof(float));
      std::memcpy(prefix_v[static_cast<size_t>(l)].data(), v.data(), n * sizeof(float));
      if (last) return;
    }
    if (rows == Rows::AfterPrefix) attention_after_prefix(l, as);
    else attention_forward(as, q.data(), k.data(), v.data(), att.data(), lse.data(), pool);

    // From here on, rows are independent: the last block continues on its supervised rows.
    float* xs = x.data();
    const float* atts = att.data();
    int64_t R = T;
    if (last) {
      R = static_cast<int64_t>(sup.size());
      gather_rows(x.data(), sup, d, sx.data());
      gather_rows(att.data(), sup, qd, satt.data());
      xs = sx.data();
      atts = satt.data();
    }
    project(l, a, atts, R, {Proj::O}, {o.data()}, {});
    for (int64_t i = 0; i < R * d; ++i) xs[i] = xs[i] + o[static_cast<size_t>(i)];  // x1 = x + o(att)

    rmsnorm_forward(xs, w.ffn_norm.data(), R, d, cfg.rms_eps, xn.data(), rstd.data(), pool);
    project(l, a, xn.data(), R, {Proj::Gate, Proj::Up}, {g.data(), u.data()}, {});
    swiglu_forward(g.data(), u.data(), h.data(), R * cfg.d_ff, pool);
    project(l, a, h.data(), R, {Proj::Down}, {dn.data()}, {});
    for (int64_t i = 0; i < R * d; ++i) xs[i] = xs[i] + dn[static_cast<size_t>(i)];  // x_out = x1 + down(h)
  }

  // Layer l's attention of the batch's rows (the sequences of as.seq_start, each after the
  // shared prefix), sequence by sequence: its keys and values are copied after the prefix's
  // (so each query's sums run over one array of keys, in order, as in the whole example)
  // and its rows ask as the last rows of prefix + own keys.
  void attention_after_prefix(int64_t l, const AttnShape& as) {
    const int64_t kvd = cfg.kv_dim(), qd = cfg.q_dim();
    float* K = prefix_k[static_cast<size_t>(l)].data();
    float* V = prefix_v[static_cast<size_t>(l)].data();
    for (int64_t s = 0; s < as.n_seq; ++s) {
      const int64_t r0 = as.seq_start[s], L = as.seq_start[s + 1] - r0;
      std::memcpy(K + prefix * kvd, k.data() + r0 * kvd, static_cast<size_t>(L * kvd) * sizeof(float));
      std::memcpy(V + prefix * kvd, v.data() + r0 * kvd, static_cast<size_t>(L * kvd) * sizeof(float));
      const int64_t keys[2] = {0, prefix + L}, queries[2] = {0, L};
      AttnShape one{prefix + L, cfg.n_head, cfg.n_kv_head, cfg.head_dim, keys, 1, attn_scratch.data()};
      one.q_start = queries;
      attention_forward(one, q.data() + r0 * qd, K, V, att.data() + r0 * qd, lse.data() + r0 * cfg.n_head, pool);
    }
  }

  // The shared prefix's forward (`prefix` tokens) for adapter a: fills prefix_k, prefix_v,
  // each with room for `own` more rows.
  void run_prefix(const std::vector<int32_t>& tokens, int64_t own, const LoraAdapter* a) {
    const int64_t P = prefix;
    plan(P, a ? a->cfg.rank : 0);
    plan_attention(P, P);
    prefix_k.resize(static_cast<size_t>(cfg.n_layer));
    prefix_v.resize(static_cast<size_t>(cfg.n_layer));
    for (int64_t l = 0; l < cfg.n_layer; ++l) {
      prefix_k[static_cast<size_t>(l)].resize(static_cast<size_t>((P + own) * cfg.kv_dim()));
      prefix_v[static_cast<size_t>(l)].resize(static_cast<size_t>((P + own) * cfg.kv_dim()));
    }
    for (int64_t t = 0; t < P; ++t) pos[static_cast<size_t>(t)] = static_cast<int32_t>(t);
    const int64_t starts[2] = {0, P};
    const AttnShape as{P, cfg.n_head, cfg.n_kv_head, cfg.head_dim, starts, 1, attn_scratch.data()};
    embedding_forward(model.weights.tok_embd, tokens.data(), P, x.data(), pool);
    for (int64_t l = 0; l < cfg.n_layer; ++l) layer_forward(l, P, as, a, Rows::Prefix);
  }

  // Runs one packed batch and adds each supervised row's NLL to its example, in position
  // order (the order the training step sums them in). With a shared prefix (prefix > 0), b
  // holds each example's rows after it, and run_prefix has run for this adapter.
  void run(const Batch& b, const LoraAdapter* a, ExampleLoss* per_seq) {
    const int64_t T = b.n_tokens(), d = cfg.d_model, V = cfg.vocab, n_seq = b.n_seqs();
    plan(T, a ? a->cfg.rank : 0);
    int64_t longest = 0;
    for (int64_t s = 0; s < n_seq; ++s) {
      const int64_t s0 = b.seq_start[static_cast<size_t>(s)], s1 = b.seq_start[static_cast<size_t>(s + 1)];
      for (int64_t t = s0; t < s1; ++t) pos[static_cast<size_t>(t)] = static_cast<int32_t>(prefix + t - s0);
      longest = std::max(longest, prefix + s1 - s0);
    }
    // After a prefix, attention runs one sequence at a time over prefix + own keys.
    plan_attention(prefix > 0 ? longest : T, longest);
    sup.clear();
    for (int64_t t = 0; t < T; ++t)
      if (b.labels[static_cast<size_t>(t)] >= 0) sup.push_back(t);
    const AttnShape as{T, cfg.n_head, cfg.n_kv_head, cfg.head_dim, b.seq_start.data(), n_seq, attn_scratch.data()};

    embedding_forward(model.weights.tok_embd, b.tokens.data(), T, x.data(), pool);
    for (int64_t l = 0; l < cfg.n_layer; ++l) layer_forward(l, T, as, a, prefix > 0 ? Rows::AfterPrefix : Rows::Whole);
    // sx now holds the final block's output of the supervised rows, in position order.
    const WeightHandle head = engine->output_handle();
    int64_t seq = 0;
    for (size_t c0 = 0; c0 < sup.size(); c0 += static_cast<size_t>(opt.loss_chunk)) {
      const int64_t C = std::min<int64_t>(opt.loss_chunk, static_cast<int64_t>(sup.size() - c0));
      chunk_labels.resize(static_cast<size_t>(C));
      std::memcpy(lx.data(), sx.data() + static_cast<int64_t>(c0) * d, static_cast<size_t>(C * d) * sizeof(float));
      for (int64_t i = 0; i < C; ++i) chunk_labels[static_cast<size_t>(i)] = b.labels[static_cast<size_t>(sup[c0 + static_cast<size_t>(i)])];
      rmsnorm_forward(lx.data(), out_norm.data(), C, d, cfg.rms_eps, lxn.data(), lrstd.data(), pool);
      engine->forward(head, lxn.data(), C, logits.data(), opt.precision);
      cross_entropy_chunk(logits.data(), chunk_labels.data(), C, V, 1.0f, row_nll.data(), pool);
      for (int64_t i = 0; i < C; ++i) {
        const int64_t t = sup[c0 + static_cast<size_t>(i)];
        while (t >= b.seq_start[static_cast<size_t>(seq + 1)]) ++seq;
        per_seq[seq].loss_sum += row_nll[static_cast<size_t>(i)];
        per_seq[seq].n_supervised += 1;
      }
    }
  }

  HeldoutLoss score(const LoraAdapter* a, const Dataset& data) {
    if (data.examples.empty()) fail(data.source, "no example to compute a held-out loss on");
    if (a) validate(*a);
    for (const Example& e : data.examples)
      for (int32_t id : e.tokens)
        if (id < 0 || id >= cfg.vocab)
          fail(data.source + ":" + std::to_string(e.line), "token " + std::to_string(id) + " outside the vocabulary of " +
                                                               std::to_string(cfg.vocab),
               "tokenize the data with this model's tokenizer");
    HeldoutLoss out;
    out.examples.assign(data.examples.size(), ExampleLoss{});
    // Examples with supervised tokens (the others are 0 of 0, as one forward would give) and
    // the prefix they share, run once.
    std::vector<int64_t> scored;
    for (size_t i = 0; i < data.examples.size(); ++i)
      if (data.examples[i].n_supervised() > 0) scored.push_back(static_cast<int64_t>(i));
    prefix = shared_prefix(data.examples, scored);
    out.shared_prefix = prefix;
    // Batches in data-set order, up to max_batch_tokens rows after the prefix.
    std::vector<std::vector<int64_t>> groups(1);
    int64_t group_tokens = 0, largest = 0, own = 0;  // own: the longest example's rows after the prefix
    for (int64_t i : scored) {
      const int64_t n = static_cast<int64_t>(data.examples[static_cast<size_t>(i)].tokens.size()) - prefix;
      if (group_tokens + n > opt.max_batch_tokens && !groups.back().empty()) {
        groups.emplace_back();
        group_tokens = 0;
      }
      groups.back().push_back(i);
      group_tokens += n;
      largest = std::max(largest, group_tokens);
      own = std::max(own, n);
    }
    // The buffers once, for the largest forward (each first touch of a page costs a fault).
    plan(std::max(prefix, largest), a ? a->cfg.rank : 0);
    if (prefix > 0) {
      const std::vector<int32_t>& t0 = data.examples[static_cast<size_t>(scored[0])].tokens;
      run_prefix(std::vector<int32_t>(t0.begin(), t0.begin() + static_cast<std::ptrdiff_t>(prefix)), own, a);
    }
    for (const std::vector<int64_t>& group : groups) {
      if (group.empty()) continue;
      Batch b = pack_batch(data.examples, group);
      drop_prefix(b, prefix);
      std::vector<ExampleLoss> per(group.size());
      run(b, a, per.data());
      for (size_t i = 0; i < group.size(); ++i) out.examples[static_cast<size_t>(group[i])] = per[i];
    }
    return out;
  }
};

HeldoutScorer::HeldoutScorer(const Model& model, const HeldoutOptions& opt)
    : impl_(std::make_unique<Impl>(model, opt, nullptr)) {}
HeldoutScorer::HeldoutScorer(const Model& model, FrozenEngine& engine, const HeldoutOptions& opt)
    : impl_(std::make_unique<Impl>(model, opt, &engine)) {}
HeldoutScorer::~HeldoutScorer() = default;
HeldoutLoss HeldoutScorer::score(const LoraAdapter* adapter, const Dataset& data) { return impl_->score(adapter, data); }

HeldoutLoss heldout_loss(const Model& model, const LoraAdapter* adapter, const Dataset& data, const HeldoutOptions& opt) {
  if (data.examples.empty()) fail(data.source, "no example to compute a held-out loss on");
  HeldoutScorer scorer(model, opt);
  return scorer.score(adapter, data);
}

HeldoutLoss heldout_loss(const Model& model, const LoraAdapter* adapter, const Dataset& data, int threads) {
  HeldoutOptions opt;
  opt.threads = threads;
  return heldout_loss(model, adapter, data, opt);
}

}  // namespace nl
