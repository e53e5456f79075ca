// The host operators of the decoder, one function per op and one for its backward (llm.c
// style). Matrices are row-major with one row per token (T rows). Backward functions ADD
// into the input gradients they produce (callers zero them first), so residual branches
// and shared inputs accumulate naturally. Every op is parallel over disjoint outputs, so
// results do not depend on the thread count.
#pragma once
#include <algorithm>
#include <cstdint>
#include <functional>
#include <vector>

#include "nightlora/util/thread_pool.h"
#include "nightlora/modelio/model.h"

namespace nl {

// Runs fn(t0, t1) over [0, T) in blocks (small T runs inline). A template, so no
// std::function is made: the ops allocate nothing (the step's memory plan owns every buffer).
template <class F>
void parallel_rows(ThreadPool& pool, int64_t T, int64_t rows_per_task, F&& fn) {
  if (T <= 0) return;
  const int64_t n_tasks = (T + rows_per_task - 1) / rows_per_task;
  if (n_tasks == 1) return fn(int64_t{0}, T);
  pool.parallel_for(n_tasks, [&](int64_t i) { fn(i * rows_per_task, std::min(T, (i + 1) * rows_per_task)); });
}

// ---- embedding: x[t] = tok_embd[tokens[t]] (frozen; no backward needed) ----
void embedding_forward(const TensorView& tok_embd, const int32_t* tokens, int64_t T, float* x, ThreadPool& pool);

// ---- RMSNorm over rows of n: y = x / sqrt(mean(x²) + eps) * w; rstd per row saved ----
void rmsnorm_forward(const float* x, const float* w, int64_t rows, int64_t n, float eps, float* y, float* rstd,
                     ThreadPool& pool);
void rmsnorm_backward(const float* dy, const float* x, const float* w, const float* rstd, int64_t rows, int64_t n,
                      float* dx, ThreadPool& pool);

// ---- RoPE, in place on T rows of n_heads heads of head_dim ----
struct RopeTable {
  int64_t head_dim = 0;
  RopeStyle style = RopeStyle::Adjacent;
  std::vector<float> inv_freq;  // head_dim/2 (after freq factors / llama3 scaling)
  std::vector<float> cos, sin;  // [max_pos][head_dim/2]
  int64_t max_pos = 0;
  void build(const ModelConfig& cfg, int64_t max_pos);
};
void rope_forward(float* x, int64_t T, int64_t n_heads, const int32_t* pos, const RopeTable& rope, ThreadPool& pool);
// Rotates a gradient back (the transpose of the rotation), in place.
void rope_backward(float* dx, int64_t T, int64_t n_heads, const int32_t* pos, const RopeTable& rope, ThreadPool& pool);

// ---- causal grouped-query attention within packed sequences ----
// q: T x (n_head*hd), k/v: T x (n_kv*hd), out: T x (n_head*hd), lse: T x n_head (the
// log-sum-exp of each softmax row, so backward recomputes probabilities without storing
// them). seq_of[t] gives the start of t's sequence.
struct AttnShape {
  int64_t T, n_head, n_kv, hd;
  const int64_t* seq_start;  // n_seq + 1 offsets
  int64_t n_seq;
  // attn_scratch_floats(...) floats for the tiles of softmax rows and each query head's own
  // key and value gradients (each task uses its own part; backward's second pass sums the
  // parts, so they must outlive the tasks): required.
  float* scratch = nullptr;
  // Forward only: the query rows of each sequence (n_seq + 1 offsets into q, out and lse)
  // when they are only its last rows: the keys and values before them (a shared prompt's,
  // computed once) are given, their queries are not. Query row r of sequence i sits at
  // position L_i - (q_start[i+1] - r) of its L_i keys and gets the very numbers it would
  // with every row present. Null: every row is a query (q, out, lse: T rows).
  const int64_t* q_start = nullptr;
};
// Queries go through attention in blocks of this many (ops_attention.cpp).
inline constexpr int64_t kAttnQueryBlock = 8;
// Per query head and token: two tiles of kAttnQueryBlock query rows (probabilities, score
// gradients) and that head's gradient of one key row and one value row.
inline int64_t attn_scratch_per_token(int64_t hd) { return 2 * kAttnQueryBlock + 2 * hd; }
inline int64_t attn_scratch_floats(int64_t n_head, int64_t T, int64_t hd) { return n_head * T * attn_scratch_per_token(hd); }
void attention_forward(const AttnShape& s, const float* q, const float* k, const float* v, float* out, float* lse,
                       ThreadPool& pool);
// dq, dk, dv are overwritten.
void attention_backward(const AttnShape& s, const float* dout, const float* q, const float* k, const float* v,
                        const float* out, const float* lse, float* dq, float* dk, float* dv, ThreadPool& pool);

// ---- SwiGLU: h = silu(g) * u ----
void swiglu_forward(const float* g, const float* u, float* h, int64_t n, ThreadPool& pool);
// dg, du are overwritten.
void swiglu_backward(const float* dh, const float* g, const float* u, float* dg, float* du, int64_t n, ThreadPool& pool);

// ---- elementwise helpers ----
void add_inplace(float* y, const float* x, int64_t n);                 // y += x
void add_bias(float* y, const float* b, int64_t rows, int64_t n);      // y[r] += b

// ---- LoRA branch: y += scale · (dropout(x)·Aᵀ)·Bᵀ ----
// The largest rank the branch's kernels take (they keep rank-sized blocks on the stack).
inline constexpr int64_t kMaxLoraRank = 4096;
struct LoraBranch {
  const float* A;  // rank x in
  const float* B;  // out x rank
  int64_t rank, in, out;
  float scale;
  float dropout;         // probability of dropping; 0 = off
  uint64_t dropout_key;  // mask key for this (step, layer, projection)
};
// z (T x rank) = dropout(x)·Aᵀ; keeps z for backward. With dropout, u_scratch (T x in)
// receives the dropped-out rows (null: a per-task buffer is allocated).
void lora_down(const LoraBranch& L, const float* x, int64_t T, float* z, ThreadPool& pool, float* u_scratch = nullptr);
// y += scale · z·Bᵀ
void lora_up_add(const LoraBranch& L, const float* z, int64_t T, float* y, ThreadPool& pool);
// Backward in two halves, so the parameter half can run while the engine computes the
// frozen input gradient into the same dx:
//  params: dA += ..., dB += ..., and dz (T x rank) for the input half. u_scratch: T x in.
void lora_backward_params(const LoraBranch& L, const float* x, const float* z, const float* dy, int64_t T, float* dA,
                          float* dB, float* u_scratch, float* dz, ThreadPool& pool);
//  input: dx += dropout_mask ⊙ (dz·A)
void lora_backward_input(const LoraBranch& L, const float* dz, int64_t T, float* dx, ThreadPool& pool);

// ---- output head loss on a chunk of rows: log-softmax + NLL ----
// logits: C x V (overwritten with d(loss_scale * NLL)/dlogits); row_nll: C values. The
// caller sums row_nll in position order, so the total does not depend on the chunk size.
void cross_entropy_chunk(float* logits, const int32_t* labels, int64_t C, int64_t V, float loss_scale,
                         double* row_nll, ThreadPool& pool);

}  // namespace nl
