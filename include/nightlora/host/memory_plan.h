// The training step's memory plan: every step buffer is sized from the model shapes, the
// largest batch (tokens) and the LoRA rank, and allocated once as one arena. The plan also
// chooses how many blocks keep their activations from the forward pass (saving their
// recompute products in backward) and how many are recomputed from their checkpointed
// input: as many are kept as a memory budget (--max-memory) allows. The last block's
// activations are always kept (its slot is the one recomputed blocks use).
//
// The estimated peak it prints is what a training process holds at its highest point
// (measured against real peak RSS in tests/host/memory_estimate_test.cpp and
// docs/PERFORMANCE.md, Memory):
//   the process before training (measured when the plan is made: code, libraries, the
//   model's metadata and tokenizer, the data; or a fixed allowance) + frozen weights (the
//   engine's resident matrices, with int8 products its Q8_0 copies of F16/F32/... ones, the
//   embedding rows a batch can touch, the norm vectors)
//   + the larger of two phases that never overlap:
//   - training: adapter state (parameters, gradients, two AdamW moments, f32) + the arena
//     + the engine's int8 staging (when products run in int8) + checkpoint state (the
//     trainer's rollback copy of adapter and moments; a save streams the state in place and
//     holds one piece of the file; the final adapter files' copy of the adapter; with a
//     validation set, the best adapter's copies);
//   - precision calibration (auto), which runs before the arena is allocated: its own step
//     arena for the calibration tokens, the replay recording and its gradient copies.
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
  size_t runtime_bytes = 0;  // the process before training (measured, or the allowance)
  bool runtime_measured = false;  // runtime_bytes is the process's resident memory, not the allowance
  size_t checkpoint_bytes = 0;   // rollback copy of adapter + moments, a save's piece, a best adapter's copy
  size_t calibration_bytes = 0;  // the calibration phase beyond the process and the weights (0: none planned)
  size_t staging_bytes = 0;      // the engine's int8 staging of the step's inputs and output gradients (0: f32)
  // What a calibration leaves held in the training phase (freed heap the allocator keeps
  // despite malloc_trim): measured at 0.5-1.1x its replay recording (2 MiB of 4.4 on
  // stories260K, 33-37 MiB of 32 on qwen2.5-0.5b); counted as half of it.
  size_t calibration_residue_bytes = 0;
  size_t budget_bytes = 0;   // the budget it was planned for (0: none)
  std::string budget_rule;   // how that budget was chosen: "--max-memory", or the default rule

  int64_t recomputed_blocks() const { return n_layer - kept_blocks; }
  size_t arena_bytes() const { return fixed_bytes + static_cast<size_t>(kept_blocks) * block_bytes; }
  // The training phase beyond the process and the weights.
  size_t training_bytes() const {
    return adapter_bytes + arena_bytes() + checkpoint_bytes + staging_bytes + calibration_residue_bytes;
  }
  size_t estimated_peak_bytes() const {
    return runtime_bytes + weight_bytes + (training_bytes() > calibration_bytes ? training_bytes() : calibration_bytes);
  }
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
  // The process's resident memory when the plan is made, less the adapter's parameters
  // (counted in adapter_bytes) and anything else the plan counts: code, libraries, the
  // model's metadata and tokenizer, the data. 0: unknown, kRuntimeAllowanceBytes is used.
  size_t resident_bytes = 0;
  // The trainer keeps a rollback copy of the adapter and its moments (Trainer; not bench-step).
  // A resume holds, before that copy exists, the checkpoint file's bytes (the state's size)
  // and decodes them straight into the trainer's state (Trainer::resume_from): within it.
  bool rollback_copy = false;
  // The run writes checkpoints and the final adapter files (a training job): a save holds one
  // piece of the file (kCheckpointSavePieceBytes), streamed from the trainer's own state; the
  // adapter writers a copy of the adapter (counted as one adapter-sized vector).
  bool saves_checkpoints = false;
  // The run keeps its best-validated adapter (a training job with a validation set,
  // train/best_adapter.h): a copy of it lives through the run, and a new best's files are
  // written while the gradients exist (the safetensors writer holds a copy of the adapter):
  // two adapter-sized vectors (the state has three). The final files are written from the
  // kept copy itself (BestAdapter::adapter), after the gradients are freed.
  bool keeps_best_adapter = false;
  // Some products may run in int8 (precision int8 or auto): the cpu engine's staging of their
  // quantized inputs and int16 output gradients is counted.
  bool int8_products = false;
  // Tokens of the precision calibration batch (auto), 0: no calibration; and the replay
  // recording's cap (CalibrationOptions::replay_bytes).
  int64_t calibration_tokens = 0;
  size_t calibration_replay_bytes = 0;
};

// Makes the plan. With a budget, keeps as many blocks as fit; throws nl::Error (naming the
// figure needed) when even recomputing every block would not fit a --max-memory budget.
MemoryPlan plan_step_memory(const Model& model, const MemoryRequest& req);

// Runtime allowance in the estimate when the process's memory is not measured (code,
// tokenizer, data, thread stacks, engine scratch).
constexpr size_t kRuntimeAllowanceBytes = size_t{64} << 20;
// What the process grows by after a measured plan, beyond what the plan counts: the
// engine's threads and per-thread panels, the log and report buffers: 1.3-1.6 MiB on
// stories260K, none on tinystories-656k (whose loading frees buffers after the plan is made);
// docs/PERFORMANCE.md, Memory.
constexpr size_t kRuntimeGrowthBytes = size_t{1} << 20;
// What a checkpoint save holds beyond the state it reads in place: one piece of the file on
// its way to the disk (checkpoint.h's kCheckpointPieceBytes; the header JSON, a few KiB, is
// made before it). Measured on qwen2.5-0.5b (rank 8, all targets): the save no longer shows
// in the peak (docs/PERFORMANCE.md, Memory; it held 4.3 copies of the state before it streamed).
constexpr size_t kCheckpointSavePieceBytes = size_t{1} << 20;
// The replay recording of a precision calibration by group search (train's default,
// train/precision_setup.cpp, and bench-step's): the search's first trial changes the first
// product already, so a larger recording serves little; this one keeps the calibration, and
// what it leaves held in the training phase (calibration_residue_bytes), within the plan.
constexpr size_t kGroupSearchReplayBytes = size_t{32} << 20;

// "1500000000", "800MiB", "800M", "1.5GiB", "2G", "4096KiB": bytes. Throws nl::Error naming
// the accepted forms.
// The process's resident memory now (VmRSS from /proc/self/statm), 0 where unknown.
size_t process_resident_bytes();

size_t parse_memory_size(const std::string& text, const std::string& option = "--max-memory");
// "123.4 MiB"
std::string format_mib(size_t bytes);

}  // namespace nl
