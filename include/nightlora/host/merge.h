// Folding LoRA adapters into a model's weights (`nightlora merge`, PEFT's merge_and_unload,
// llama.cpp's llama-export-lora): for every adapted projection,
//   W' = W + Σ_i scale_i · (alpha_i / rank_i) · B_i · A_i,
// computed in f32 from the dequantized base, one row at a time. The adapters are held in
// the model's own row layout (load_adapter converts llama.cpp's permuted Q/K rows and
// PEFT's Hugging Face rows to it), which is also the layout of the file's rows, so the
// merged weight is exactly what inference computes with the adapters applied.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "nightlora/host/adapter_spec.h"
#include "nightlora/modelio/model.h"
#include "nightlora/quant/qtype.h"

namespace nl {

// Adds the adapters' product for projection `p` of `layer` to one row (`cols` values) of
// that projection's weight, in the model's row layout.
void add_lora_to_row(const std::vector<ScaledAdapter>& adapters, int64_t layer, Proj p, int64_t row, float* values,
                     int64_t cols);

struct MergeOptions {
  // The type of the output's weight matrices; unset: every tensor keeps the base's type.
  // Norms, biases and other 1-D tensors always keep theirs.
  std::optional<QType> type;
  int threads = 0;  // <= 0: one per hardware thread
};

struct MergedTensor {
  std::string name;
  QType from = QType::F32;
  QType to = QType::F32;
  bool adapted = false;    // an adapter changed it
  bool converted = false;  // re-encoded (adapted, or another type); false: copied byte for byte
};

struct MergeSummary {
  std::vector<MergedTensor> tensors;  // in file order
  int n_adapted = 0;
  int n_converted = 0;
  bool gguf = true;        // false: a Hugging Face folder was written
  uint32_t file_type = 0;  // general.file_type written (GGUF)
  size_t file_bytes = 0;   // the GGUF file, or model.safetensors
};

// Writes `base` with the adapters folded in to `out_path` as a GGUF file, tensors streamed
// one at a time through GgufWriter (peak memory: one tensor, plus the adapters). A GGUF
// base keeps all its metadata (general.file_type updated when `type` is given) and tensor
// order; tensors no adapter touches are copied byte for byte unless `type` changes them. A
// Hugging Face base is written as `convert` writes it (llama.cpp names and Q/K layout, its
// tokenizer as metadata; `type` unset: the embedding's type). Atomic: a failure leaves no
// output. Throws nl::Error for no adapters, an output path that is the base itself, an
// unwritable output, or a non-finite merged value.
MergeSummary merge_to_gguf(const Model& base, const std::vector<ScaledAdapter>& adapters, const std::string& out_path,
                           const MergeOptions& opt = {});

// Writes `base` (loaded from a Hugging Face folder) with the adapters folded in to the
// folder `out_dir` (created when missing): model.safetensors streamed one tensor at a time,
// config.json (torch_dtype updated when `type` is given), and the tokenizer and generation
// files copied from the base folder. `type`, when given, must be f32, f16 or bf16. Throws
// nl::Error for a GGUF base (its tokenizer cannot be written as tokenizer.json), an output
// folder that is the base folder, or an unwritable output.
MergeSummary merge_to_hf(const Model& base, const std::vector<ScaledAdapter>& adapters, const std::string& out_dir,
                         const MergeOptions& opt = {});

// One line per adapted or converted tensor (unless per_tensor is false), then the totals.
std::string format_merge_summary(const MergeSummary& s, bool per_tensor = true);

}  // namespace nl
