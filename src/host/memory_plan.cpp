// The memory plan: one layout function for the step's buffers (used both to measure the
// arena and to carve it), the choice of kept blocks under a budget, and memory sizes as
// users write them.
#include "nightlora/host/memory_plan.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>

#include <unistd.h>

#include "nightlora/util/error.h"
#include "ops.h"
#include "step_buffers.h"

namespace nl {
namespace {

constexpr int64_t kAlignFloats = 16;  // 64 bytes: a cache line, and any SIMD width we use

// Hands out consecutive aligned spans from `base`; with no base it only counts.
struct Carver {
  float* base;
  int64_t used = 0;
  Span take(int64_t n) {
    Span s{base ? base + used : nullptr, n};
    used += (n + kAlignFloats - 1) / kAlignFloats * kAlignFloats;
    return s;
  }
};

BlockActs lay_out_block(const ModelConfig& c, int64_t T, int64_t rank, Carver& cv) {
  const int64_t d = c.d_model, qd = c.q_dim(), kvd = c.kv_dim(), ff = c.d_ff;
  BlockActs b;
  b.xn = cv.take(T * d);
  b.rstd1 = cv.take(T);
  b.q_lin = cv.take(c.qk_norm ? T * qd : 0);
  b.k_lin = cv.take(c.qk_norm ? T * kvd : 0);
  b.q = cv.take(T * qd);
  b.k = cv.take(T * kvd);
  b.v = cv.take(T * kvd);
  b.rstd_q = cv.take(c.qk_norm ? T * c.n_head : 0);
  b.rstd_k = cv.take(c.qk_norm ? T * c.n_kv_head : 0);
  b.att = cv.take(T * qd);
  b.lse = cv.take(T * c.n_head);
  b.x1 = cv.take(T * d);
  b.xn2 = cv.take(T * d);
  b.rstd2 = cv.take(T);
  b.g = cv.take(T * ff);
  b.u = cv.take(T * ff);
  b.h = cv.take(T * ff);
  for (Span& z : b.z) z = cv.take(T * rank);
  return b;
}

// The bytes the cpu engine keeps of one matrix: as stored, except Q5_0, which it keeps as Q8_0
// tiles of the same values (engine::resident_type): 34 bytes per row and 32 columns.
size_t resident_matrix_bytes(const TensorView& w) {
  if (w.type == QType::Q5_0 && w.cols() % 32 == 0) return static_cast<size_t>(w.rows() * (w.cols() / 32) * 34);
  return w.nbytes;
}

size_t served_matrix_bytes(const Model& m) {
  size_t n = resident_matrix_bytes(m.weights.output.present() ? m.weights.output : m.weights.tok_embd);
  for (const LayerWeights& l : m.weights.layers)
    for (int p = 0; p < kNumProj; ++p) n += resident_matrix_bytes(l.proj(static_cast<Proj>(p)));
  return n;
}

// The embedding rows one batch can touch (each may sit on its own page), at most the table.
size_t embedding_bytes(const Model& m, int64_t max_tokens) {
  const TensorView& e = m.weights.tok_embd;
  if (!e.present()) return 0;
  const size_t page = 4096;
  return std::min(e.nbytes, static_cast<size_t>(max_tokens) * (e.row_bytes() + page));
}

size_t vector_bytes(const ModelConfig& c) {
  int64_t n = (2 * c.n_layer + 1) * c.d_model;
  if (c.qkv_bias) n += c.n_layer * (c.q_dim() + 2 * c.kv_dim());
  if (c.qk_norm) n += c.n_layer * 2 * c.head_dim;
  return static_cast<size_t>(n) * sizeof(float);
}

// Whether any matrix the engine serves is Q4_K or Q5_K (their int8 products stage offsets as
// well).
bool serves_int8_offsets(const Model& m) {
  const auto has_offsets = [](QType t) { return t == QType::Q4_K || t == QType::Q5_K; };  // engine::int8_has_offsets
  bool any = has_offsets((m.weights.output.present() ? m.weights.output : m.weights.tok_embd).type);
  for (const LayerWeights& l : m.weights.layers)
    for (int p = 0; p < kNumProj; ++p) any = any || has_offsets(l.proj(static_cast<Proj>(p)).type);
  return any;
}

// The Q8_0 copies the cpu engine's int8 products make of matrices whose quants they cannot
// use (engine::int8_uses_stored_quants: all but Q4_0, Q8_0, the K-quants and Q5_0, kept as
// Q8_0 tiles): 34 bytes per row and 32 columns.
size_t int8_copy_bytes(const Model& m) {
  const auto copy = [](const TensorView& w) -> size_t {
    const QType t = w.type;
    const bool stored = t == QType::Q4_0 || t == QType::Q8_0 || t == QType::Q4_K || t == QType::Q5_K ||
                        t == QType::Q6_K || (t == QType::Q5_0 && w.cols() % 32 == 0);
    return stored ? 0 : static_cast<size_t>(w.rows() * ((w.cols() + 31) / 32) * 34);
  };
  size_t n = copy(m.weights.output.present() ? m.weights.output : m.weights.tok_embd);
  for (const LayerWeights& l : m.weights.layers)
    for (int p = 0; p < kNumProj; ++p) n += copy(l.proj(static_cast<Proj>(p)));
  return n;
}

// The cpu engine's int8 staging for a step of T tokens (src/engine/cpu_engine.cpp): one
// buffer of quantized input rows (per 32 values: 32 int8, a scale and a sum) and one of
// int16 output-gradient rows (and a float per 64 rows), each grown to its largest product:
// the widest projection at T tokens, or the output head at the loss chunk's C tokens. With
// Q4_K/Q5_K weights (offsets), a float more per input block (the forward's offset factors z)
// and the input gradient's offset sums G (a float per token and column block).
size_t int8_staging_bytes(const ModelConfig& c, int64_t T, int64_t C, bool offsets) {
  const int64_t max_cols = std::max({c.d_model, c.q_dim(), c.d_ff});
  const int64_t max_rows = std::max({c.q_dim(), c.kv_dim(), c.d_model, c.d_ff});
  const int64_t block_bytes = 32 + 4 + 4 + (offsets ? 4 : 0);
  auto fwd = [&](int64_t tokens, int64_t cols) { return tokens * ((cols + 31) / 32) * block_bytes; };
  auto grad = [](int64_t tokens, int64_t rows) { return tokens * ((rows + 63) / 64 * 64 * 2 + (rows + 63) / 64 * 4); };
  auto offset_sums = [&](int64_t tokens, int64_t cols) { return offsets ? tokens * ((cols + 31) / 32) * 4 : 0; };
  return static_cast<size_t>(std::max(fwd(T, max_cols), fwd(C, c.d_model)) +
                             std::max(grad(T, max_rows), grad(C, c.vocab)) +
                             std::max(offset_sums(T, max_cols), offset_sums(C, c.d_model)));
}

}  // namespace

int64_t lay_out_step_buffers(const ModelConfig& c, const StepDims& dims, int64_t kept_blocks, StepBuffers& b,
                             float* base) {
  const int64_t T = dims.max_tokens, r = dims.rank, d = c.d_model, qd = c.q_dim(), kvd = c.kv_dim(), ff = c.d_ff;
  const int64_t C = std::min(dims.loss_chunk, T), max_in = std::max({d, qd, ff});
  Carver cv{base};
  b.slots.clear();
  for (int64_t i = 0; i < std::max<int64_t>(kept_blocks, 1); ++i) b.slots.push_back(lay_out_block(c, T, r, cv));
  b.ckpt = cv.take((c.n_layer + 1) * T * d);
  b.o_out = cv.take(T * d);
  b.d_out = cv.take(T * d);
  for (Span& z : b.dz) z = cv.take(T * r);
  for (Span* s : {&b.dx, &b.dxn, &b.tmp1, &b.tmp2}) *s = cv.take(T * d);
  for (Span* s : {&b.datt, &b.dq}) *s = cv.take(T * qd);
  for (Span* s : {&b.dk, &b.dv}) *s = cv.take(T * kvd);
  b.dq_lin = cv.take(c.qk_norm ? T * qd : 0);
  b.dk_lin = cv.take(c.qk_norm ? T * kvd : 0);
  for (Span* s : {&b.dh, &b.dg, &b.du}) *s = cv.take(T * ff);
  b.lora_u = cv.take(T * max_in);
  for (Span* s : {&b.lx, &b.lxn, &b.ldxn, &b.ldx}) *s = cv.take(C * d);
  b.lrstd = cv.take(C);
  // The loss chunk's logits and the attention scratch are never live at once (the loss runs
  // between the blocks' forward and backward passes, each attention op uses its scratch only
  // while it runs), so they share one region.
  const int64_t logits_n = C * c.vocab, attn_n = attn_scratch_floats(c.n_head, T, c.head_dim);
  const Span shared = cv.take(std::max(logits_n, attn_n));
  b.logits = {shared.data(), logits_n};
  b.attn_scratch = {shared.data(), attn_n};
  b.bind(0);
  return cv.used;
}

std::string MemoryPlan::describe() const {
  char buf[768];
  std::snprintf(buf, sizeof buf,
                "keeping activations of %lld/%lld blocks, recomputing %lld; arena %s (%s shared + %lld x %s per kept "
                "block; %lld tokens, rank %lld); weights %s; adapter + optimizer %s; int8 staging %s; checkpoint copies %s; "
                "process %s (%s)",
                static_cast<long long>(kept_blocks), static_cast<long long>(n_layer),
                static_cast<long long>(recomputed_blocks()), format_mib(arena_bytes()).c_str(),
                format_mib(fixed_bytes).c_str(), static_cast<long long>(kept_blocks), format_mib(block_bytes).c_str(),
                static_cast<long long>(max_tokens), static_cast<long long>(rank), format_mib(weight_bytes).c_str(),
                format_mib(adapter_bytes).c_str(), format_mib(staging_bytes).c_str(), format_mib(checkpoint_bytes).c_str(),
                format_mib(runtime_bytes).c_str(), runtime_measured ? "measured" : "allowance");
  std::string s = buf;
  if (calibration_bytes > 0) s += "; calibration " + format_mib(calibration_bytes) + " before the arena";
  s += "; estimated peak " + format_mib(estimated_peak_bytes());
  if (!budget_rule.empty())
    s += "; budget " + (budget_bytes > 0 ? format_mib(budget_bytes) : std::string("none")) + " (" + budget_rule + ")";
  return s;
}

MemoryPlan plan_step_memory(const Model& model, const MemoryRequest& req) {
  const ModelConfig& c = model.config;
  if (req.max_tokens <= 0) fail("memory plan", "the largest batch has no tokens");
  MemoryPlan p;
  p.n_layer = c.n_layer;
  p.max_tokens = req.max_tokens;
  p.rank = req.rank;
  p.loss_chunk = req.loss_chunk;
  StepBuffers b;
  const StepDims dims{req.max_tokens, req.rank, req.loss_chunk};
  const int64_t one = lay_out_step_buffers(c, dims, 1, b, nullptr);
  const int64_t two = lay_out_step_buffers(c, dims, 2, b, nullptr);
  p.block_bytes = static_cast<size_t>(two - one) * sizeof(float);
  p.fixed_bytes = static_cast<size_t>(one) * sizeof(float) - p.block_bytes;
  p.weight_bytes = served_matrix_bytes(model) + embedding_bytes(model, req.max_tokens) + vector_bytes(c) +
                   (req.int8_products ? int8_copy_bytes(model) : 0);
  const size_t param_bytes = static_cast<size_t>(req.n_adapter_params) * sizeof(float);
  p.adapter_bytes = param_bytes * 4;  // parameters, gradients, AdamW's two moments
  // The trainer's rollback point (adapter + moments) lives through the run. A save streams
  // the trainer's state to the file and holds one piece of it (a piece's pages are touched as
  // it fills: a state smaller than a piece touches less). The job's final adapter files are
  // written after the last step from the trainer's adapter: the safetensors writer holds a
  // copy of it, the GGUF writer its B matrices. The freed gradients make room for them in
  // principle, but the allocator does not reuse it all (the peak was 4 MiB above the step's
  // on qwen2.5-0.5b at rank 8, during the GGUF write): counted as one adapter-sized vector
  // more, as if none of the gradients' memory were reused. A best adapter adds two
  // (keeps_best_adapter): its copy, and its writer's copy while a validation holds the
  // gradients. They cover the final files too, which are then written from the kept copy
  // (no copy of it is made) after the gradients are freed: 8 adapter-sized vectors, 9 if none
  // of the gradients' memory is reused, where a validation with the gradients held 9. (The
  // final files' vector counted on top of the two made the estimate 8% high on qwen2.5-0.5b
  // at rank 64 with --valid: 1704 MiB for a peak of 1573.)
  const size_t state_bytes = param_bytes * 3;
  const size_t save_piece = std::min(kCheckpointSavePieceBytes, state_bytes);
  const size_t adapter_copies = req.keeps_best_adapter ? param_bytes * 2 : req.saves_checkpoints ? param_bytes : 0;
  p.checkpoint_bytes = (req.rollback_copy ? state_bytes : 0) + (req.saves_checkpoints ? save_piece : 0) + adapter_copies;
  if (req.int8_products)
    p.staging_bytes = int8_staging_bytes(c, req.max_tokens, std::min(req.loss_chunk, req.max_tokens),
                                         serves_int8_offsets(model));
  p.runtime_measured = req.resident_bytes > 0;
  p.runtime_bytes = p.runtime_measured ? req.resident_bytes + kRuntimeGrowthBytes : kRuntimeAllowanceBytes;
  if (req.calibration_tokens > 0) {
    // Calibration's own step (no plan: one kept block, sized for its batch), the replay
    // recording, and its vectors: gradients, the two reference passes' flattened gradients
    // and one trial's; with the adapter and its moments, which exist by then.
    StepBuffers cb;
    const int64_t calib_T = std::min(req.calibration_tokens, req.max_tokens);
    const size_t calib_arena =
        static_cast<size_t>(lay_out_step_buffers(c, {calib_T, req.rank, req.loss_chunk}, 1, cb, nullptr)) * sizeof(float);
    // The recording holds at most one reference pass's product outputs (forward, the
    // recomputes of all blocks but the last, input gradients, the head): often under its cap.
    const int64_t d = c.d_model, qd = c.q_dim(), kvd = c.kv_dim(), ff = c.d_ff, L = c.n_layer;
    const int64_t fwd = qd + 2 * kvd + d + 2 * ff + d, grad = 5 * d + qd + ff;
    const size_t pass_bytes =
        static_cast<size_t>(calib_T * (L * (fwd + grad) + (L - 1) * (fwd - d) + c.vocab + d)) * sizeof(float);
    const size_t recording = std::min(req.calibration_replay_bytes, pass_bytes);
    p.calibration_bytes = calib_arena + recording + param_bytes * 4 + state_bytes;
    p.calibration_residue_bytes = recording / 2;
  }
  const int64_t L = std::max<int64_t>(c.n_layer, 1);
  p.budget_bytes = req.max_memory;
  p.budget_rule = !req.budget_rule.empty() ? req.budget_rule : req.max_memory > 0 ? "--max-memory" : "";
  if (req.max_memory == 0) {
    p.kept_blocks = std::clamp<int64_t>(req.keep_blocks, 1, L);
    return p;
  }
  p.kept_blocks = 1;
  if (p.estimated_peak_bytes() > req.max_memory && !req.budget_rule.empty()) return p;
  if (p.estimated_peak_bytes() > req.max_memory)
    fail("--max-memory " + format_mib(req.max_memory),
         "this configuration needs an estimated " + format_mib(p.estimated_peak_bytes()) +
             " even when every block but the last is recomputed (" + p.describe() + ")",
         "raise --max-memory to at least " + format_mib(p.estimated_peak_bytes()) +
             ", or lower --seq-len, --batch or --rank");
  const size_t spare = req.max_memory - p.estimated_peak_bytes();
  p.kept_blocks = std::min<int64_t>(L, 1 + static_cast<int64_t>(p.block_bytes ? spare / p.block_bytes : L));
  return p;
}

size_t process_resident_bytes() {
  std::ifstream f("/proc/self/statm");
  unsigned long long size = 0, resident = 0;
  if (!(f >> size >> resident)) return 0;
  const long page = sysconf(_SC_PAGESIZE);
  return page > 0 ? static_cast<size_t>(resident) * static_cast<size_t>(page) : 0;
}

size_t parse_memory_size(const std::string& text, const std::string& option) {
  auto bad = [&]() -> size_t {
    fail(option + " " + text, "not a memory size", "write bytes (1500000000) or a number with a unit: KiB, MiB, GiB "
                                                    "(or K, M, G, same), KB, MB, GB (powers of ten)");
  };
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
  if (i == 0) return bad();
  double value = 0;
  try {
    size_t used = 0;
    value = std::stod(text.substr(0, i), &used);
    if (used != i) return bad();
  } catch (const std::exception&) {
    return bad();
  }
  std::string unit;
  for (size_t j = i; j < text.size(); ++j)
    if (!std::isspace(static_cast<unsigned char>(text[j]))) unit += static_cast<char>(std::tolower(text[j]));
  double mult = 0;
  if (unit.empty() || unit == "b") mult = 1;
  else if (unit == "k" || unit == "kib") mult = 1024.0;
  else if (unit == "m" || unit == "mib") mult = 1024.0 * 1024;
  else if (unit == "g" || unit == "gib") mult = 1024.0 * 1024 * 1024;
  else if (unit == "kb") mult = 1e3;
  else if (unit == "mb") mult = 1e6;
  else if (unit == "gb") mult = 1e9;
  else return bad();
  const double bytes = value * mult;
  if (!(bytes >= 1) || bytes > 1e18) return bad();
  return static_cast<size_t>(std::llround(bytes));
}

std::string format_mib(size_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buf;
}

}  // namespace nl
