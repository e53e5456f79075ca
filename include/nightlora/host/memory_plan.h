// The training step's memory plan: every step buffer is sized from the model shapes, the
// largest batch (tokens) and the LoRA rank, and allocated once as one arena. The plan also
// chooses how many blocks keep their activations from the forward pass (saving their
// recompute products in backward) and how many are recomputed from their checkpointed
// input: as many are kept as a memory budget (--max-memory) allows. The last block's
// activations are always kept (its slot is the one recomputed blocks use).
//
// The estimated peak it prints is the sum of what a training process holds:
//   frozen weights (the engine's resident matrices, the embedding rows a batch can touch,
//   the norm vectors) + adapter state (parameters, gradients and two AdamW moments, f32)
//   + the arena + a fixed runtime allowance (code, tokenizer, data, thread stacks).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "nightlora/modelio/model.h"

namespace nl {

struct MemoryPlan {
  int64_t n_layer = 0;
  int64_t kept_blocks = 1;   // blocks whose activations stay from the forward pass
  int64_t max_tokens = 0;    // arena capacity: tokens per batch
  int64_t rank = 0;
  int64_t loss_chunk = 64;
  size_t fixed_bytes = 0;    // arena bytes that do not depend on kept_blocks (checkpoints, gradients, loss chunk)
  size_t block_bytes = 0;    // arena bytes of one kept block's activations
  size_t weight_bytes = 0;   // frozen weights resident while training
  size_t adapter_bytes = 0;  // adapter + gradients + AdamW moments
  size_t runtime_bytes = 0;  // allowance for everything else in the process
  size_t budget_bytes = 0;   // the budget it was planned for (0: none)
  std::string budget_rule;   // how that budget was chosen: "--max-memory", or the default rule

  int64_t recomputed_blocks() const { return n_layer - kept_blocks; }
  size_t arena_bytes() const { return fixed_bytes + static_cast<size_t>(kept_blocks) * block_bytes; }
  size_t estimated_peak_bytes() const { return weight_bytes + adapter_bytes + runtime_bytes + arena_bytes(); }
  // "keeping activations of 10/24 blocks, recomputing 14; arena X MiB; weights Y MiB; ..."
  std::string describe() const;
};

struct MemoryRequest {
  int64_t max_tokens = 0;         // tokens of the largest batch
  int64_t rank = 8;
  int64_t n_adapter_params = 0;   // trainable parameters (A and B of every adapted projection)
  int64_t loss_chunk = 64;
  size_t max_memory = 0;          // budget for the estimated peak; 0: no budget
  // How the budget was chosen. Empty: the user's --max-memory, which must fit (an error
  // otherwise). Else the default rule (memory_budget.h): a plan that does not fit it keeps
  // one block, as with no budget.
  std::string budget_rule;
  int64_t keep_blocks = 1;        // without a budget: blocks kept (clamped to [1, n_layer])
};

// Makes the plan. With a budget, keeps as many blocks as fit; throws nl::Error (naming the
// figure needed) when even recomputing every block would not fit a --max-memory budget.
MemoryPlan plan_step_memory(const Model& model, const MemoryRequest& req);

// Runtime allowance in the estimate (code, tokenizer, data, thread stacks, engine scratch).
constexpr size_t kRuntimeAllowanceBytes = size_t{64} << 20;

// "1500000000", "800MiB", "800M", "1.5GiB", "2G", "4096KiB": bytes. Throws nl::Error naming
// the accepted forms.
size_t parse_memory_size(const std::string& text, const std::string& option = "--max-memory");
// "123.4 MiB"
std::string format_mib(size_t bytes);

}  // namespace nl
