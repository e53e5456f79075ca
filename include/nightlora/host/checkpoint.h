// What a training checkpoint holds, and its byte format.
//
// Everything needed to continue a run exactly, so that a resumed run ends with an adapter and
// optimizer state byte-identical to an uninterrupted one:
//   - the adapter (A and B of every enabled pair) and AdamW's moments and step count;
//   - the number of optimizer steps done, which is also the schedule position;
//   - the data cursor: examples consumed from the data order stream. The order itself is a pure
//     function of (number of examples, seed, position) (see DataOrder), and so is the epoch;
//   - the RNG streams: LoRA dropout masks are counter-based, drawn from hash(seed, step,
//     micro-batch), so (seed, step) restores them; there is no other random state in a step;
//   - the run's identity: a fingerprint of the base model and of the training data, and the
//     configuration that shapes the trajectory (learning rate, schedule, batch, seeds, LoRA
//     settings...). A checkpoint of another model, data set or configuration is refused.
//   - the precision plan (the mode of each frozen product), so a resumed run uses the same one;
//   - progress figures that are not part of the trajectory (wall time and tokens so far), so
//     the log and the report continue across restarts.
//
// Payload layout (the CheckpointStore adds the checksum footer and writes it atomically):
//   "NLTRAIN1" | u64 LE header length | header JSON | exact state (encode_train_state).
// The exact state is kept apart from the JSON header so tests (and users) can compare the
// trajectory part of two checkpoints byte for byte; it holds no time or host-dependent data.
//
// A save streams: write_checkpoint reads the state where it lives (the trainer's adapter and
// optimizer, through a TrainStateView) and hands the bytes on in pieces of at most
// kCheckpointPieceBytes, so a save holds one piece, not copies of the state (the adapter
// with its two AdamW moments is 50 MiB on qwen2.5-0.5b at rank 8: whole copies made the
// save the peak of a short run; docs/PERFORMANCE.md, Memory).
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "nightlora/host/lora.h"
#include "nightlora/host/precision_plan.h"

namespace nl {

struct TrainState {
  int64_t step = 0;      // optimizer updates done (= schedule position)
  int64_t data_pos = 0;  // examples consumed from the data order stream
  LoraAdapter adapter;
  LoraAdapter adam_m, adam_v;  // AdamW first and second moments (same shapes as adapter)
  int64_t adam_t = 0;          // AdamW's bias-correction step count
};

struct CheckpointMeta {
  nlohmann::json identity;  // {"model": fingerprint, "data": fingerprint, "config": {...}}: must match to resume
  nlohmann::json progress;  // {"elapsed_s": ..., "tokens": ...}: informative, not checked
};

struct Checkpoint {
  CheckpointMeta meta;
  TrainState state;
  // The run's precision plan, in the header as "precision_plan" (its calibration summary kept,
  // the per-product figures left to OUT/precision_plan.json). Absent in checkpoints written
  // before plans existed: those runs were all f32.
  std::optional<PrecisionPlan> precision;
};

// A TrainState by reference: what a save reads without copying it (Trainer::state_view).
struct TrainStateView {
  int64_t step = 0;
  int64_t data_pos = 0;
  const LoraAdapter& adapter;
  const LoraAdapter& adam_m;
  const LoraAdapter& adam_v;
  int64_t adam_t = 0;

  TrainStateView(int64_t step_, int64_t data_pos_, const LoraAdapter& adapter_, const LoraAdapter& adam_m_,
                 const LoraAdapter& adam_v_, int64_t adam_t_)
      : step(step_), data_pos(data_pos_), adapter(adapter_), adam_m(adam_m_), adam_v(adam_v_), adam_t(adam_t_) {}
  // NOLINTNEXTLINE(google-explicit-constructor): a TrainState is viewed wherever a view is asked for
  TrainStateView(const TrainState& s)
      : TrainStateView(s.step, s.data_pos, s.adapter, s.adam_m, s.adam_v, s.adam_t) {}
};

// Receives a payload piece by piece, in order (CheckpointStore::save's writer, or a string).
using ByteSink = std::function<void(std::string_view piece)>;
// The largest piece write_checkpoint hands to its sink: what a save holds beyond the state.
constexpr size_t kCheckpointPieceBytes = size_t{1} << 20;

// The trajectory part, little-endian, fixed order: step, data_pos, adam_t, LoRA config, then
// per pair its shape and A, B, m.A, m.B, v.A, v.B.
std::string encode_train_state(const TrainStateView& s);
// `where` names the file in error messages. Throws nl::Error on malformed bytes.
TrainState decode_train_state(std::string_view bytes, const std::string& where);

// What the trajectory bytes hold apart from the values: the counters, the LoRA configuration
// and every pair's shape (`shape`'s A and B are left empty), and whether every stored value
// is finite. Reading it checks all that can be wrong with the bytes (nl::Error as
// decode_train_state), so a resume can refuse a checkpoint before overwriting anything.
struct TrainStateLayout {
  int64_t step = 0;
  int64_t data_pos = 0;
  int64_t adam_t = 0;
  LoraAdapter shape;
  bool all_finite = true;
};
TrainStateLayout read_train_state_layout(std::string_view bytes, const std::string& where);
// Decodes the values straight into `adapter`, `adam_m` and `adam_v`, which must already have
// the stored shapes (nl::Error naming `where` otherwise, before anything is written): their
// storage is reused, so a resume decodes into the trainer's own vectors and holds no decoded
// copy of the state next to them (Trainer::resume_from). The checks are read_train_state_layout's,
// all made before the first value is written.
void decode_train_state_into(std::string_view bytes, const std::string& where, LoraAdapter& adapter,
                             LoraAdapter& adam_m, LoraAdapter& adam_v);

std::string encode_checkpoint(const Checkpoint& c);
// The bytes encode_checkpoint gives for (meta, state, precision), handed to `sink` in pieces
// of at most kCheckpointPieceBytes as they are made. Throws nl::Error when the moments' shapes do not match the adapter's (before any
// state bytes go out); an exception from `sink` passes through.
void write_checkpoint(const CheckpointMeta& meta, const TrainStateView& state,
                      const std::optional<PrecisionPlan>& precision, const ByteSink& sink);
Checkpoint decode_checkpoint(std::string_view payload, const std::string& where);
// The header alone (meta and precision plan, checked as decode_checkpoint does; `state` left
// empty): a resume decodes the state bytes (checkpoint_state_bytes) into the trainer instead.
Checkpoint decode_checkpoint_header(std::string_view payload, const std::string& where);
// Just the trajectory bytes of an encoded checkpoint (for byte-for-byte comparisons).
std::string_view checkpoint_state_bytes(std::string_view payload, const std::string& where);

// A fingerprint of a model or data path (a file, or a folder's top-level files), cheap even
// for multi-GB models: for each file its size (and name, in a folder), the 64-bit FNV-1a hash of its first 4 MiB
// (a GGUF's header and tensor table, a safetensors header) and of 32 evenly spaced 64 KiB
// samples after that. Modification times are deliberately not used: copying a model elsewhere keeps it
// the same model. Throws nl::Error when the path cannot be read.
std::string fingerprint_path(const std::string& path);

// Throws nl::Error naming every differing identity field, when `saved` (from the checkpoint
// at `where`) does not match `current`; the hint says how to start a new run instead.
void check_identity(const nlohmann::json& saved, const nlohmann::json& current, const std::string& where);

}  // namespace nl
