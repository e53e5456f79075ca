// The step's memory plan as buffers: every float array a training step touches, carved out
// of one arena that is sized from the shapes and allocated once. The same function lays the
// buffers out to measure the arena (for --max-memory, before anything is allocated) and to
// carve it, so the printed plan and the real allocation cannot disagree.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "nightlora/modelio/model.h"

namespace nl {

// A window into the arena. It has the two members the step code uses on a std::vector
// (data() and operator[]), so buffers read the same whether they are owned or carved.
struct Span {
  float* p = nullptr;
  int64_t n = 0;
  float* data() const { return p; }
  float& operator[](size_t i) const { return p[i]; }
};

// The activations backward needs from one block's forward: kept per block for the blocks
// whose recompute the plan saves, recomputed into a shared slot for the others.
struct BlockActs {
  Span xn, rstd1, q_lin, k_lin, q, k, v, rstd_q, rstd_k, att, lse, x1, xn2, rstd2, g, u, h;
  Span z[kNumProj];  // LoRA z = u·Aᵀ per projection (T x rank)
};

// The shapes the plan is made for.
struct StepDims {
  int64_t max_tokens = 0;  // tokens per batch (all sequences packed)
  int64_t rank = 0;        // LoRA rank
  int64_t loss_chunk = 64; // rows per output-head chunk
};

// The step's buffers. The BlockActs base holds the spans of the block being computed
// (bind() points it at that block's slot); the rest is shared by all blocks.
struct StepBuffers : BlockActs {
  std::vector<BlockActs> slots;  // one per kept block (the first doubles as the recompute slot)
  Span ckpt;                     // (n_layer + 1) x T x d: block inputs, last = final output
  Span o_out, d_out;             // products added to the residual stream
  Span dz[kNumProj];
  Span dx, dxn, tmp1, tmp2, datt, dq, dk, dv, dq_lin, dk_lin, dh, dg, du, lora_u;
  Span lx, lxn, lrstd, logits, ldxn, ldx;  // loss chunk buffers
  Span attn_scratch;                        // attn_scratch_floats: attention tiles and per-head dK, dV

  void bind(size_t slot) { static_cast<BlockActs&>(*this) = slots[slot]; }
};

// Lays every buffer out from `base` (64-byte aligned, one after another); with base ==
// nullptr it only measures. Returns the floats used. kept_blocks >= 1.
int64_t lay_out_step_buffers(const ModelConfig& cfg, const StepDims& dims, int64_t kept_blocks, StepBuffers& out,
                             float* base);

}  // namespace nl
