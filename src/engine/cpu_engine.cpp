// The cpu backend. Its resident layout is made once at load: Q4_0, Q8_0, K-quant and F16
// matrices are repacked into 8-row tiles (tile_layout.h, exactly the quantized bytes; Q5_0
// ones into Q8_0 tiles of the same values); other types keep their quantized rows as the
// model stores them. Both products dequantize a few rows at a
// time into a per-thread "panel" (through the same dequantizer) and use it for a whole
// block of tokens, so the work is a GEMM per task, not a GEMV per token:
//  - forward: tasks are (three 8-row groups x token block); each Y element is computed by
//    one task, over the full row (the scalar set in one dot product; the SIMD sets that
//    take column chunks, PanelKernels::forward_chunk_cols, chunk by chunk).
//  - input grad: tasks are (column block x token block), column blocks aligned to the
//    quantization block so a task dequantizes only its slice of each row; each task adds
//    the row groups' contributions into its own slice of dX, rows in increasing order.
//    (In int8 mode a thread with no task left may take over half of a running task's
//    columns, with their sums so far: steal_int8_grad_work.)
// No two threads ever write an output at once, so no locks, no transposed copy, and results
// do not depend on the thread count. With the scalar kernels the summation order is the one
// of reference_products.h (bit-identical); the SIMD kernels agree with it to rounding.
//
// Precision modes (per product, see Precision in frozen_engine.h):
//  - f32: the above.
//  - f16: the input rows are guarded and rounded to f16 into a staging buffer (range_guard.h),
//    the f32 kernels run on it, then each output row is unscaled, guarded and rounded to f16
//    in place. Weights are the same dequantized values as in f32 mode.
//  - int8 (kernels_int8.h): forward quantizes the input rows once per product (per 32
//    columns), then each (pair of row groups x token block) task packs its 16 rows into two
//    int8 panels (four groups, 32 rows, with a set that has forward_quad) and runs integer
//    dot products; input grad packs 64 rows x the task's columns at a time and requantizes
//    dY with W's scales folded in. Q4_0/Q8_0/K-quant tiles give their own quants; other
//    types a Q8_0 copy made at their first int8 product (ResidentMatrix::int8_copy).
// The scalar kernels reproduce precision_reference.h exactly in every mode.
//
// No product allocates (a training step must not): each pool thread's panels are sized when
// the engine is built, for the largest task of any matrix in any mode, and a task uses the
// panels of the thread running it (ThreadPool's worker index). The f16/int8 staging grows
// with the token count; reserve_forward/reserve_input_grad size it before the step loop.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <new>
#include <stdexcept>
#include <thread>
#include <vector>

#include "backends.h"
#include "kernels.h"
#include "kernels_int8.h"
#include "kernels_matvec.h"
#include "range_guard.h"
#include "tile_layout.h"
#include "nightlora/engine/reference_products.h"
#include "nightlora/util/thread_pool.h"
#include "nightlora/quant/qtype.h"
#include "nightlora/util/error.h"

namespace nl {
namespace {

using engine::kTileRows;

// Tokens per f32 task: each task dequantizes its panels once, so more tokens per task do
// less of that. Measured on Zen 3 (2 threads, Q4_0/Q4_K/Q8_0, 128 and 512 tokens) against
// 64: the forward (best of 4 interleaved runs) 0-23% faster on llama-3.2-1b and
// qwen2.5-1.5b (median 12%), qwen2.5-0.5b within 4% either way; the input gradient (its time
// over the forward's, medians of 3 runs) a median 3-5% faster on the three models' shapes.
constexpr int64_t kTokensPerTask = 128;
// Tokens per int8 task: each task packs its weight panels once (a transpose of the tiles,
// for the K-quants with their scales unpacked), so more tokens per task pack less. Measured
// on Zen 5 (2 threads, qwen2.5-1.5b shapes at 256 and 512 tokens), when F16 and Q4_K panels
// were requantized per task: against 64 tokens, 256 made them 15-35% faster (forward up at
// 512 tokens 35.4 -> 23.9 ms) and Q4_0/Q8_0 ones 3-6%; 512 gained little more.
constexpr int64_t kInt8TokensPerTask = 256;
// Rows of W per f32 forward task: three row groups, the AVX2 kernel's 24 output columns.
constexpr int64_t kForwardTaskRows = 3 * kTileRows;
// Tasks (of kForwardTaskRows rows) per band of the f32 forward product (see run_f32).
// Before bands, the tasks of one row group ran for every token block in turn, so all of X
// was read once per row group: with 512 tokens of a down projection's 8960 columns (18 MB of
// f32 rows, more than this VM's share of L3), forward fell to 43-54% of the f32 peak.
// Measured on Zen 5 with 8-row tasks (2 threads, qwen2.5-1.5b and llama-3.2-1b up/down,
// Q4_0, 512 tokens; noisy): bands of 16 groups made down 129-167 -> 96-117 ms, up 97-111 ->
// 87-98 ms; 32 groups were no better.
constexpr int64_t kForwardBandTasks = 5;
// Column ranges per band of the f32 input gradient, for the same reason (dY's rows are read
// once per band): measured as above, llama-3.2-1b gate/up at 512 tokens 88 -> 82-83 ms, the
// others within 3%; 8 ranges were no better.
constexpr int64_t kGradBandRanges = 4;
// Int8 forward products of at most this many tokens on Q4_0/Q8_0 tiles run through the
// matrix-vector kernels (kernels_matvec.h: each tile read once, no panels packed), the
// others through the panels. Same bits either way (the int8 definition); f32 ones too
// where the set's f32 matrix-vector kernel keeps the panel kernel's order (AVX2).
constexpr int64_t kMatvecMaxTokens = 4;
// Weight bytes per matrix-vector task at least: waking a pool thread costs 15-35 us on the
// development VM, about what one thread takes to stream 128 KiB of tiles, so a smaller
// matrix (a 0.5B model's k and v: 64 KiB) runs on the calling thread alone.
constexpr int64_t kMatvecMinTaskBytes = 128 << 10;

// Kept small (no name, no shape vector): the engine's metadata is a few dozen bytes per
// matrix next to megabytes of weights.
struct ResidentMatrix {
  int64_t rows = 0, cols = 0;
  QType type = QType::F32;
  int64_t block_size = 1;
  size_t block_bytes = 4;
  const uint8_t* row_data = nullptr;  // the quantized rows as stored, when not tiled
  size_t row_bytes = 0;
  engine::TiledMatrix tiles;          // empty unless the type has a tiled layout
  // The int8 products of a matrix without int8 tiles (int8_native) pack its Q8_0 copy
  // (kernels_int8.h), made by the engine at the first int8 reservation or submission
  // (CpuEngine::make_int8_copy, under its lock with no product in flight).
  mutable std::unique_ptr<engine::TiledMatrix> int8_copy;
  bool tiled_layout = false;  // tiles hold the weights (or did, until release_f32_weights)
  bool released = false;      // tiles freed by release_f32_weights: int8 products on the copy only
  bool tiled() const { return tiled_layout; }
  size_t weight_bytes() const {
    return released ? 0 : tiled() ? tiles.bytes.size() : row_bytes * static_cast<size_t>(rows);
  }
  const uint8_t* row(int64_t r) const { return row_data + static_cast<size_t>(r) * row_bytes; }
};

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The unit of a task's column range: what one dequantizer call starts on (half a K-quant
// super-block; a quantization block of row-stored types), and at least the 32 columns of an
// int8 block.
int64_t column_unit(const ResidentMatrix& m) {
  return std::max<int64_t>(32, m.tiled() ? engine::dequant_cols(m.type) : m.block_size);
}

// Columns per forward call of the f32 product: the kernel set's chunk rounded to the column
// unit, or every column.
int64_t forward_chunk_cols(const engine::PanelKernels& k, const ResidentMatrix& m) {
  if (k.forward_chunk_cols <= 0) return m.cols;
  const int64_t unit = column_unit(m);
  return std::min(m.cols, std::max(unit, k.forward_chunk_cols / unit * unit));
}

// Column widths of the input-gradient tasks, in column units: the kernel set's for f32 (and
// f16) tasks (PanelKernels::grad_cols_per_task; on Zen 1, 2 threads, 256 tokens, the f32
// kernel was 5-10% faster on the qwen2.5-0.5b shapes with 128 columns than with 256, with
// 64-token tasks then), 256 for int8 tasks (measured on Zen 1: 10% slower with 128, the same
// with 512).
int64_t input_grad_cols_per_task(const engine::PanelKernels& k, const ResidentMatrix& m, Precision p) {
  const int64_t target = p == Precision::Int8 ? 256 : k.grad_cols_per_task, unit = column_unit(m);
  return std::max(unit, target / unit * unit);
}

// The column ranges of an input gradient's tasks: at most input_grad_cols_per_task wide,
// aligned to the quantization block and to 32 (the int8 blocks), nearly equal, and as many
// that (ranges x token blocks) is a multiple of the threads where the blocks allow, so that
// no thread idles while another finishes the last task. (The output head's 64-row loss chunks have one token block: with ranges of
// 256, 256, 256 and 128 columns one of two threads idled for a quarter of the product.)
struct ColumnRanges {
  int64_t n = 0, blocks = 0, block = 0, cols = 0;
  ColumnRanges(const engine::PanelKernels& k, const ResidentMatrix& m, Precision p, int64_t token_blocks,
               int64_t threads)
      : blocks(ceil_div(m.cols, column_unit(m))), block(column_unit(m)), cols(m.cols) {
    n = ceil_div(blocks, input_grad_cols_per_task(k, m, p) / block);
    while ((n * token_blocks) % threads != 0 && n < blocks) ++n;
  }
  int64_t begin(int64_t i) const { return std::min(cols, i * blocks / n * block); }
  int64_t end(int64_t i) const { return begin(i + 1); }
};

// Q4_0/Q8_0/Q4_K/Q5_K/Q6_K tiles give the int8 kernels their quants as stored; other matrices
// their Q8_0 copy.
bool int8_native(const ResidentMatrix& m) { return m.tiled() && engine::int8_uses_stored_quants(m.type); }
const engine::TiledMatrix& int8_tiles(const ResidentMatrix& m) { return int8_native(m) ? m.tiles : *m.int8_copy; }

// Tokens per int8 input-gradient task. Q4_0/Q8_0 tasks (whose packing is a cheap transpose)
// take at most kInt8TokensPerTask, fewer when T would leave fewer token blocks than threads,
// unless the matrix is tall enough (kInt8GradFullTokensRows) and wide enough that its column
// ranges alone give every thread kInt8GradFullTokensRangesPerThread tasks: each task packs
// its panels once per row block, so halving its tokens doubles the packing per product.
// Measured on Zen 5 (AVX-VNNI, 2 threads, 3-4 interleaved rounds, docs/PERFORMANCE.md
// 2026-12-04): the input gradient of the qwen2.5-1.5b and llama-3.2-1b q/gate/down and the
// llama-3.2-1b output head 0.87-0.93x the time at 128 tokens (64 for the head), 0.91-0.98x at
// 256, the same at 512; qwen2.5-0.5b gate (4 ranges) 0.95-0.98x at 128 and 256; on k/v
// (256-512 rows) and qwen2.5-0.5b q (896 rows) splitting stayed faster.
// Tasks run in the order (column range, token block), so the threads share the weights
// while they stream through them; measured on Zen 1 with 2 threads, a 64-row loss chunk of
// the output head took 1.6-2.2x the forward's time as 4 column ranges of one token block,
// 1.4x as 2 x 32 tokens each.
constexpr int64_t kInt8GradFullTokensRows = 1024, kInt8GradFullTokensRangesPerThread = 2;
constexpr int64_t kMinInt8GradTaskTokens = 4;
int64_t int8_grad_tokens_per_task(const engine::PanelKernels& k, const ResidentMatrix& m, int64_t T,
                                  int64_t threads) {
  const int64_t ranges = ceil_div(m.cols, input_grad_cols_per_task(k, m, Precision::Int8));
  if (m.rows >= kInt8GradFullTokensRows && ranges >= kInt8GradFullTokensRangesPerThread * threads)
    return std::min(T, kInt8TokensPerTask);
  return std::min(kInt8TokensPerTask, std::max(kMinInt8GradTaskTokens, ceil_div(ceil_div(T, threads), 4) * 4));
}

// Task i of n_units x n_tblocks tasks taken in bands of `band` units (row groups, column
// ranges): within a band token block by token block, and unit by unit within a token block.
// The band's weights stay cached while every token block passes, and each token block's
// rows are read once per band rather than once per unit.
struct BandedTask {
  int64_t unit, tb;
};
BandedTask banded_task(int64_t i, int64_t n_units, int64_t n_tblocks, int64_t band) {
  const int64_t b = i / (band * n_tblocks), u0 = b * band, ub = std::min(band, n_units - u0);
  const int64_t r = i - b * band * n_tblocks;
  return {u0 + r % ub, r / ub};
}

// Rows of the f32 input-gradient panel of a task n columns wide: several row groups, about
// PanelKernels::grad_panel_floats (see input_grad_task).
int64_t grad_panel_rows(const engine::PanelKernels& k, int64_t n) {
  return std::clamp<int64_t>(k.grad_panel_floats / n / kTileRows, 1, 16) * kTileRows;
}

// Q4_K/Q5_K's input-gradient offsets are unpacked this many rows at a time (a slab per thread:
// CpuEngine::add_grad_offsets).
constexpr int64_t kOffsetSlabRows = 128;  // whole row groups
static_assert(kOffsetSlabRows % kTileRows == 0);

// One pool thread's scratch: dequantized rows (f32 and f16 modes, and a row group of the
// matrix the engine makes a Q8_0 copy of) and the int8 panels. Sized once
// (WorkerScratch::reserve_for), so the kernels' own resize() calls never grow them.
struct alignas(64) WorkerScratch {  // own cache lines: the packers write `blocks` per task
  std::vector<float> floats;
  engine::ForwardPanel forward8[4];  // an int8 forward task's row groups (two, or four: forward_quad)
  engine::GradPanel grad8;
  std::vector<float> offset_slab;  // Q4_K/Q5_K's input-gradient offsets: rows x column blocks
  // An int8 input-gradient task's block of dX (its tokens x its columns, contiguous),
  // copied out when the task ends: dX's own rows are a matrix row apart, and as for dY
  // (Int8GradRows) the kernel is faster on a contiguous block.
  std::vector<float> dx_block;

  // Grows the buffers to what the largest task on m needs, for both products, every mode:
  // the f32 forward tasks' three row groups x a column chunk, one row group x every column
  // (a Q8_0 copy is made a row group at a time), and the input-gradient tasks' panels of
  // their column block (every block has the task width but the last, narrower one).
  void reserve_for(const engine::PanelKernels& k, const ResidentMatrix& m) {
    int64_t n_floats = std::max(kTileRows * m.cols, kForwardTaskRows * forward_chunk_cols(k, m)), grad_blocks = 0;
    for (const Precision p : {Precision::F32, Precision::Int8}) {
      const int64_t cb = input_grad_cols_per_task(k, m, p);
      for (const int64_t w : {std::min(cb, m.cols), m.cols % cb}) {
        if (w == 0) continue;
        if (p == Precision::F32)
          n_floats = std::max(n_floats, grad_panel_rows(k, w) * w);
        else
          grad_blocks = std::max(grad_blocks, ceil_div(w, engine::kQ8Block));
      }
    }
    if (static_cast<int64_t>(floats.size()) < n_floats) floats.resize(static_cast<size_t>(n_floats));
    const int64_t n_dx = kInt8TokensPerTask * std::min(input_grad_cols_per_task(k, m, Precision::Int8), m.cols);
    if (static_cast<int64_t>(dx_block.size()) < n_dx) dx_block.resize(static_cast<size_t>(n_dx));
    const int64_t forward_blocks = ceil_div(m.cols, engine::kQ8Block);
    for (engine::ForwardPanel& p : forward8) {
      if (forward_blocks > p.blocks) p.resize(forward_blocks);
      if (engine::int8_has_offsets(m.type)) p.resize_offsets(forward_blocks);
    }
    if (engine::int8_has_offsets(m.type) && static_cast<int64_t>(offset_slab.size()) < kOffsetSlabRows * forward_blocks)
      offset_slab.resize(static_cast<size_t>(kOffsetSlabRows * forward_blocks));  // a task's blocks at most
    // (resize never shrinks: the panel keeps the largest blocks and parts of any matrix.)
    grad8.resize(std::max(grad_blocks, grad8.blocks), std::max(grad8.parts, engine::int8_grad_parts(m.type)));
  }
};

// Rows [r0, r0 + nr) (one row group), columns [c0, c1) (block aligned) of W as floats.
void fill_panel(const engine::PanelKernels& k, const ResidentMatrix& m, int64_t r0, int64_t nr, int64_t c0,
                int64_t c1, float* panel, int64_t ld) {
  if (m.tiled()) {
    k.dequantize_tiles(m.tiles, r0 / kTileRows, c0, c1, panel, ld);
    return;
  }
  const size_t slice_offset = static_cast<size_t>(c0 / m.block_size) * m.block_bytes;
  for (int64_t i = 0; i < nr; ++i) dequantize_row(m.type, m.row(r0 + i) + slice_offset, panel + i * ld, c1 - c0);
}

// Rows [24u, 24u + 24) of Y for tokens [t0, t1): the panel holds the three row groups,
// a chunk of columns at a time where the kernels take chunks (forward_chunk_cols).
void forward_task(const engine::PanelKernels& k, const ResidentMatrix& m, WorkerScratch& ws, const float* X, float* Y,
                  int64_t u, int64_t t0, int64_t t1) {
  const int64_t rows = m.rows, cols = m.cols, chunk = forward_chunk_cols(k, m);
  const int64_t r0 = u * kForwardTaskRows, nr = std::min(kForwardTaskRows, rows - r0);
  float* panel = ws.floats.data();
  for (int64_t c0 = 0; c0 < cols; c0 += chunk) {
    const int64_t c1 = std::min(cols, c0 + chunk), n = c1 - c0;
    for (int64_t i = 0; i < nr; i += kTileRows)
      fill_panel(k, m, r0 + i, std::min(kTileRows, nr - i), c0, c1, panel + i * n, n);
    k.forward(X + t0 * cols + c0, cols, t1 - t0, panel, n, nr, n, Y + t0 * rows + r0, rows, c0 > 0);
  }
}

// The panel holds several row groups of the task's columns (grad_panel_rows), so the kernel
// keeps a block of dX in registers over all of them: with one 8-row group per call, dX was
// loaded and stored once per 8 rows, a large part of why the input gradient took ~2.7x
// the forward product's time.
void input_grad_task(const engine::PanelKernels& k, const ResidentMatrix& m, WorkerScratch& ws, const float* dY,
                     float* dX, int64_t c0, int64_t c1, int64_t t0, int64_t t1) {
  const int64_t rows = m.rows, cols = m.cols, n = c1 - c0;
  const int64_t kGradPanelRows = grad_panel_rows(k, n);
  float* panel = ws.floats.data();
  for (int64_t t = t0; t < t1; ++t) std::memset(dX + t * cols + c0, 0, static_cast<size_t>(n) * sizeof(float));
  for (int64_t r0 = 0; r0 < rows; r0 += kGradPanelRows) {
    const int64_t nr = std::min(kGradPanelRows, rows - r0);
    for (int64_t i = 0; i < nr; i += kTileRows)
      fill_panel(k, m, r0 + i, std::min(kTileRows, nr - i), c0, c1, panel + i * n, n);
    k.input_grad(dY + t0 * rows + r0, rows, t1 - t0, panel, n, nr, n, dX + t0 * cols + c0, cols);
  }
}

// Input rows of an int8 forward product, quantized once per product (kernels_int8.h).
struct Int8Rows {
  int64_t blocks = 0;  // per row
  std::vector<int8_t> q;
  std::vector<float> d;
  std::vector<int32_t> sum;
  std::vector<float> z;  // d * sum, for the Q4_K/Q5_K offsets (forward_offset_factors)
};

// dY of an int8 input gradient as its tasks read it (kernels_int8.h grad_rows): its scales
// per (token, 64-row block) (tokens x blocks) and its values as int16 by row block (block rb
// of token t: 64 values at (rb * tokens + t) * 64, zeros past the last row), so a task reads
// each row block's dY as one contiguous run. Read in place, the pieces would sit a row of dY
// apart (8 KiB for 2048 rows: the same few cache sets for every token); measured on Zen 3
// (one 64-256 token task, llama-3.2-1b and qwen2.5 shapes, with the per-task output block
// below), the input-gradient kernel ran 7-25% faster so.
//
// The tasks convert dY themselves, a unit at a time: a unit is a token block's tokens x
// kUnitBlocks row blocks, converted once, by the first task to need it or to reach the unit
// before it (need()). So each unit is usually converted a unit ahead, while the other threads
// compute, and a task seldom waits. Before, a pass over all of dY ran ahead of the tasks: its
// reads and writes (6 bytes a value) went no faster on 2 threads than on 1, the memory being
// shared, and it took 7-8% of the input gradient of qwen2.5-0.5b gate on 2 threads. Measured
// on Zen 5 (2 threads, Q4_0/Q8_0/F16 q, gate, down of the three presets at 128 and 512
// tokens, 6 interleaved rounds): the input gradient 1.018x faster (geometric mean of 54
// cases; 0.93-1.15x, the small q products gaining most: one loop on the pool, not two).
class Int8GradRows {
 public:
  static constexpr int64_t kUnitBlocks = 8;
  int64_t blocks = 0, tokens = 0;
  std::vector<float> ey;
  std::vector<int16_t> by_block;

  const int16_t* block(int64_t rb, int64_t t) const {
    return by_block.data() + (rb * tokens + t) * engine::kGradRowBlock;
  }
  int64_t units_per_token_block() const { return ceil_div(blocks, kUnitBlocks); }

  // Grows the buffers for T tokens of `rows` rows, in token blocks of at least
  // min_task_tokens (from reserve_input_grad, or at a product larger than reserved).
  void grow(int64_t T, int64_t rows, int64_t min_task_tokens) {
    const int64_t nb = ceil_div(rows, engine::kGradRowBlock);
    if (static_cast<int64_t>(ey.size()) < T * nb) {
      ey.resize(static_cast<size_t>(T * nb));
      by_block.resize(static_cast<size_t>(T * nb * engine::kGradRowBlock));
    }
    const int64_t units = ceil_div(T, min_task_tokens) * ceil_div(nb, kUnitBlocks);
    if (units > n_state_) {
      state_ = std::make_unique<std::atomic<uint8_t>[]>(static_cast<size_t>(units));
      n_state_ = units;
    }
  }

  // Starts a product on dY (T x rows), whose tasks take token blocks of tpt tokens.
  void start(const float* dY, int64_t rows, int64_t T, int64_t tpt) {
    dY_ = dY;
    rows_ = rows;
    blocks = ceil_div(rows, engine::kGradRowBlock);
    tokens = T;
    tpt_ = tpt;
    const int64_t units = ceil_div(T, tpt) * units_per_token_block();
    for (int64_t u = 0; u < units; ++u) state_[static_cast<size_t>(u)].store(kTodo, std::memory_order_relaxed);
  }

  // Returns when unit `unit` of token block tb (its row blocks [unit * kUnitBlocks, ...)) is
  // converted, having converted it, or the next unit, if no task had claimed them.
  void need(const engine::Int8Kernels& k8, int64_t tb, int64_t unit) {
    const int64_t units = units_per_token_block();
    for (int64_t u = unit; u < std::min(units, unit + 2); ++u) {
      std::atomic<uint8_t>& st = state_[static_cast<size_t>(tb * units + u)];
      uint8_t todo = kTodo;
      if (st.load(std::memory_order_relaxed) == kTodo && st.compare_exchange_strong(todo, kConverting)) {
        convert(k8, tb, u);
        st.store(kDone, std::memory_order_release);
      }
    }
    const std::atomic<uint8_t>& st = state_[static_cast<size_t>(tb * units + unit)];
    while (st.load(std::memory_order_acquire) != kDone) std::this_thread::yield();
  }

 private:
  enum : uint8_t { kTodo, kConverting, kDone };

  // Unit u of token block tb: each token's rows of the unit, its next token's prefetched.
  void convert(const engine::Int8Kernels& k8, int64_t tb, int64_t u) {
    const int64_t t0 = tb * tpt_, t1 = std::min(tokens, t0 + tpt_);
    const int64_t rb = u * kUnitBlocks, r0 = rb * engine::kGradRowBlock;
    const int64_t nr = std::min(kUnitBlocks * engine::kGradRowBlock, rows_ - r0);
    for (int64_t t = t0; t < t1; ++t) {
      if (t + 1 < t1)
        for (int64_t r = 0; r < nr; r += 16) __builtin_prefetch(dY_ + (t + 1) * rows_ + r0 + r);
      k8.grad_rows(dY_ + t * rows_ + r0, nr, ey.data() + t * blocks + rb,
                   by_block.data() + (rb * tokens + t) * engine::kGradRowBlock, tokens * engine::kGradRowBlock);
    }
  }

  const float* dY_ = nullptr;
  int64_t rows_ = 0, tpt_ = 1;
  std::unique_ptr<std::atomic<uint8_t>[]> state_;  // per (token block, unit)
  int64_t n_state_ = 0;
};

// Row groups [g, g + ng) x tokens [t0, t1): ng = 4 through the set's forward_quad (each
// activation broadcast shared by four groups), else 1 or 2 (the AVX2 kernels share it
// between two groups).
void forward_task_int8(const engine::Int8Kernels& k8, const ResidentMatrix& m, WorkerScratch& ws, const Int8Rows& x,
                       float* Y, int64_t g, int64_t ng, int64_t t0, int64_t t1) {
  const int64_t rows = m.rows;
  for (int64_t i = 0; i < ng; ++i) k8.pack_forward_tiles(int8_tiles(m), g + i, ws.forward8[i]);
  const int64_t ldq = x.blocks * engine::kQ8Block, r0 = g * kTileRows;
  const int8_t* q = x.q.data() + t0 * ldq;
  const float* d = x.d.data() + t0 * x.blocks;
  const int32_t* sum = x.sum.data() + t0 * x.blocks;
  const int64_t last_rows = std::min(kTileRows, rows - (g + ng - 1) * kTileRows);
  if (ng == 4) {
    const engine::ForwardPanel* const p[4] = {&ws.forward8[0], &ws.forward8[1], &ws.forward8[2], &ws.forward8[3]};
    k8.forward_quad(q, d, sum, ldq, t1 - t0, p, last_rows, Y + t0 * rows + r0, rows);
  } else if (ng == 2)
    k8.forward_pair(q, d, sum, ldq, t1 - t0, ws.forward8[0], ws.forward8[1], last_rows, Y + t0 * rows + r0, rows);
  else
    k8.forward(q, d, sum, ldq, t1 - t0, ws.forward8[0], last_rows, Y + t0 * rows + r0, rows);
  if (ws.forward8[0].has_offsets) {  // Q4_K/Q5_K (kernels_int8.h)
    const engine::ForwardPanel* const p[4] = {&ws.forward8[0], &ws.forward8[1], &ws.forward8[2], &ws.forward8[3]};
    k8.add_forward_offsets(x.z.data() + t0 * x.blocks, x.blocks, t1 - t0, p, ng, last_rows, Y + t0 * rows + r0, rows);
  }
}

// Work stealing at the end of an int8 input gradient (run_int8). A task's columns all run
// over every row of W, so on few tasks a thread that runs slower ends late while the others
// idle: on the 2-thread VM one core ran 10-15% slower than the other for seconds at a time
// (the forward's hundreds of small tasks absorb that), and on 6 ranges of 1536 columns the
// faster thread idled 13% of the product. Narrower last tasks cost more than they saved
// (each reads all of dY's int16 rows again). Instead a thread with nothing left asks the
// running task with the most work left for half of it: at its next row block the task
// hands over the right half of its columns for the remaining row blocks, with their sums so
// far written into dX, and goes on with the left half. Each output's sums still run over
// the row blocks in order, so the results are the same bits.
//
// One slot per thread. A thief sets the victim's `thief` (compare-and-swap from -1) and
// waits for its own `answer`; the victim takes the request with an exchange (at a row block,
// or when its task ends, refusing then), so a thief that withdraws (its victim no longer
// running) and a victim that answers never both succeed.
struct alignas(64) GradTaskSlot {
  std::atomic<bool> running{false};
  std::atomic<int64_t> stealable{0};  // column units x row blocks a thief would get now
  std::atomic<int> thief{-1};
  std::atomic<int> answer{0};         // for this slot's thread as a thief: kPending, ...
  int64_t c0 = 0, c1 = 0, rb = 0, tb = 0;  // ... and, when kGranted, what it got
};
enum : int { kPending, kGranted, kDenied };

// The smallest part a thief takes (column units x row blocks): less is not worth the
// hand-over and another read of the part's dY.
constexpr int64_t kMinStealWork = 16;

// A task, or a part of one: columns [c0, c1) of token block tb ([t0, t1)), row blocks from
// rb0 on (with the sums of the row blocks before rb0 in dX).
struct Int8GradTask {
  int64_t c0, c1, tb, t0, t1, rb0;
};

void input_grad_task_int8(const engine::Int8Kernels& k8, const ResidentMatrix& m,
                          WorkerScratch& ws, Int8GradRows& g, float* dX, const Int8GradTask& task,
                          GradTaskSlot* slots, int self) {
  engine::GradPanel& panel = ws.grad8;
  GradTaskSlot& me = slots[self];
  const int64_t cols = m.cols, nt = task.t1 - task.t0, ldd = task.c1 - task.c0;
  const int64_t unit = column_unit(m), c0 = task.c0;
  int64_t c1 = task.c1;
  float* const dX_rows = dX + task.t0 * cols;
  // The sums build up in the contiguous block (first row block: no zeroed block to read);
  // the last row block writes them into dX. Measured on Zen 3 (one thread, Q4_0, 256 tokens,
  // the task loop in one process, interleaved): zeroing the block and copying it out took
  // 6.6% of the input gradient of 896 x 896 and 896 x 4864 matrices (28 row blocks).
  float* const D = ws.dx_block.data();
  // What a thief would get from row block rb on: the right half of the columns (whole units).
  const auto middle = [&] { return c0 + (c1 - c0) / unit / 2 * unit; };
  const auto stealable = [&](int64_t rb) { return middle() > c0 ? (c1 - middle()) / unit * (g.blocks - rb) : 0; };
  me.stealable.store(stealable(task.rb0), std::memory_order_relaxed);
  me.running.store(true);
  for (int64_t rb = task.rb0; rb < g.blocks; ++rb) {
    if (me.thief.load(std::memory_order_relaxed) >= 0) {
      if (const int th = me.thief.exchange(-1); th >= 0) {
        GradTaskSlot& t = slots[th];
        int answer = kDenied;
        if (stealable(rb) >= kMinStealWork) {
          const int64_t mid = middle();
          if (rb > task.rb0)  // (at rb0 the sums so far are in dX already, or there are none)
            for (int64_t i = 0; i < nt; ++i)
              std::memcpy(dX_rows + i * cols + mid, D + i * ldd + (mid - c0),
                          static_cast<size_t>(c1 - mid) * sizeof(float));
          t.c0 = mid, t.c1 = c1, t.rb = rb, t.tb = task.tb;
          c1 = mid;
          answer = kGranted;
        }
        t.answer.store(answer, std::memory_order_release);
      }
    }
    me.stealable.store(stealable(rb), std::memory_order_relaxed);
    if (rb == task.rb0 || rb % Int8GradRows::kUnitBlocks == 0) g.need(k8, task.tb, rb / Int8GradRows::kUnitBlocks);
    const int64_t n = c1 - c0;
    k8.pack_grad_tiles(int8_tiles(m), rb, c0 / engine::kQ8Block, (c1 + engine::kQ8Block - 1) / engine::kQ8Block, panel);
    // The sums start from none, from the sums so far in dX (a part's first row block) or
    // from D, and go to D or, at the last row block, to dX.
    const bool first = rb == task.rb0, last = rb + 1 == g.blocks;
    const float* acc = !first ? D : task.rb0 > 0 ? dX_rows + c0 : nullptr;
    const engine::GradOut out{acc, first ? cols : ldd, last ? dX_rows + c0 : D, last ? cols : ldd};
    k8.input_grad(g.block(rb, task.t0), engine::kGradRowBlock, g.ey.data() + task.t0 * g.blocks + rb, g.blocks, nt,
                  panel, n, out);
  }
  me.running.store(false);
  if (const int th = me.thief.exchange(-1); th >= 0) slots[th].answer.store(kDenied, std::memory_order_release);
}

// Once no task is left to take: parts of the running tasks with the most work left, one
// after another, until none has kMinStealWork left to give.
void steal_int8_grad_work(const engine::Int8Kernels& k8, const ResidentMatrix& m,
                          WorkerScratch& ws, Int8GradRows& g, float* dX, GradTaskSlot* slots, int n_slots, int self,
                          int64_t tokens_per_task, int64_t T) {
  GradTaskSlot& me = slots[self];
  for (;;) {
    int victim = -1;
    int64_t most = kMinStealWork - 1;
    for (int v = 0; v < n_slots; ++v) {
      if (v == self || !slots[v].running.load(std::memory_order_relaxed)) continue;
      const int64_t w = slots[v].stealable.load(std::memory_order_relaxed);
      if (w > most) most = w, victim = v;
    }
    if (victim < 0) return;
    GradTaskSlot& v = slots[victim];
    me.answer.store(kPending, std::memory_order_relaxed);
    int none = -1;
    if (!v.thief.compare_exchange_strong(none, self)) continue;  // another thief's turn
    int mine = self;
    if (!v.running.load() && v.thief.compare_exchange_strong(mine, -1)) continue;  // it ended: withdrawn
    int answer;
    while ((answer = me.answer.load(std::memory_order_acquire)) == kPending) std::this_thread::yield();
    if (answer == kDenied) continue;
    const int64_t t0 = me.tb * tokens_per_task;
    input_grad_task_int8(k8, m, ws, g, dX, {me.c0, me.c1, me.tb, t0, std::min(T, t0 + tokens_per_task), me.rb},
                         slots, self);
  }
}

// Runs `allocate` (buffers sized from the model or from `tokens`); running out of memory
// there becomes an nl::Error that says which buffers and what to do, instead of a bare
// std::bad_alloc ending the process.
template <class F>
void out_of_memory_is_an_error(const char* what, int64_t tokens, F&& allocate) {
  try {
    allocate();
  } catch (const std::bad_alloc&) {
    fail("cpu engine", std::string("out of memory allocating ") + what +
                           (tokens > 0 ? " for " + std::to_string(tokens) + " tokens" : std::string()),
         tokens > 0 ? "lower --batch or --seq-len, or free memory" : "use a smaller model or fewer --threads, or free memory");
  } catch (const std::length_error&) {
    fail("cpu engine", std::string("cannot allocate ") + what + (tokens > 0 ? " for " + std::to_string(tokens) + " tokens" : std::string()) +
                           ": larger than this system can address",
         "lower --batch or --seq-len");
  }
}

class CpuEngine final : public FrozenEngine {
 public:
  CpuEngine(const Model& model, const EngineOptions& opt)
      : kernels_(engine::select_kernels(opt.isa)),
        int8_(engine::select_int8_kernels(opt.isa, kernels_.isa)),
        matvec_(engine::matvec_kernels_for(kernels_.isa)),
        f16_(engine::f16_kernels_for(kernels_.isa)),
        pool_(opt.threads),
        waiter_runs_(opt.waiter_runs_products) {
    const ModelConfig& cfg = model.config;
    n_layer_ = cfg.n_layer;
    if (static_cast<int64_t>(model.weights.layers.size()) != n_layer_)
      fail(model.source_path, "model has " + std::to_string(model.weights.layers.size()) + " layers, config says " +
                                  std::to_string(n_layer_));
    out_of_memory_is_an_error("the weights' tiles and the workers' panels", 0, [&] {
      for (int64_t l = 0; l < n_layer_; ++l)
        for (int p = 0; p < kNumProj; ++p) add(model.weights.layers[static_cast<size_t>(l)].proj(static_cast<Proj>(p)));
      add(model.weights.output.present() ? model.weights.output : model.weights.tok_embd);
      // Touched now (resize writes every element), so the first products do not fault pages in either.
      scratch_.resize(static_cast<size_t>(pool_.size()));
      for (WorkerScratch& ws : scratch_)
        for (const ResidentMatrix& m : mats_) ws.reserve_for(kernels_, m);
    });
    dispatcher_ = std::thread([this] { dispatch_loop(); });
  }

  ~CpuEngine() override {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
    }
    queue_cv_.notify_all();
    dispatcher_.join();
  }

  std::string backend() const override { return "cpu"; }
  int threads() const override { return pool_.size(); }
  std::string isa() const override { return engine::engine_isa_name(kernels_.isa, int8_); }
  // The f16 mode runs the f32 kernels plus conversions and the range guard: never cheaper.
  // The int8 mode is cheaper on the tiles it packs (the stored quants, or a Q8_0 copy) with
  // every set but the widening NEON one on Q8_0 (int8_beats_f32_on_stored_quants).
  std::vector<Precision> cheaper_modes(WeightHandle h) const override {
    const ResidentMatrix& m = at(h);
    const QType stored = !int8_native(m) ? QType::Q8_0 : m.tiles.five_bit_quants ? QType::Q5_0 : m.type;
    if (engine::int8_beats_f32_on_stored_quants(int8_, stored)) return {Precision::Int8};
    return {};
  }

  WeightHandle handle(int64_t layer, Proj p) const override {
    if (layer < 0 || layer >= n_layer_) fail("engine", "layer " + std::to_string(layer) + " out of range");
    return static_cast<WeightHandle>(layer * kNumProj + static_cast<int>(p));
  }
  WeightHandle output_handle() const override { return static_cast<WeightHandle>(n_layer_ * kNumProj); }
  int64_t rows(WeightHandle h) const override { return at(h).rows; }
  int64_t cols(WeightHandle h) const override { return at(h).cols; }

  EngineTicket submit_forward(WeightHandle h, const float* X, int64_t T, float* Y,
                              Precision p = Precision::F32) override {
    if (p == Precision::Int8) need_int8_copy(at(h));
    return submit(Job{Job::Forward, &in_mode(h, p), X, T, Y, p, 0});
  }
  EngineTicket submit_input_grad(WeightHandle h, const float* dY, int64_t T, float* dX,
                                 Precision p = Precision::F32) override {
    if (p == Precision::Int8) need_int8_copy(at(h));
    return submit(Job{Job::InputGrad, &in_mode(h, p), dY, T, dX, p, 0});
  }

  // A thread that waits for products it submitted runs them itself when none is running,
  // instead of sleeping until the dispatcher has woken up, run them and woken it: two thread
  // wake-ups less per synchronous product (15-35 us each on the development VM, against
  // 60-150 us for a k/v projection of 128 tokens). Products still run one at a time, in
  // submission order. Only the submitter does: when any waiter did (the training step's
  // timing monitor, src/host/step_timing.cpp, waits for every product on its own thread),
  // the step was 6% slower (medians of 5 interleaved runs, 187 -> 176 tokens/s); with the
  // submitter only it is unchanged (186.3 and 186.9).
  void wait(EngineTicket t) override {
    std::unique_lock<std::mutex> lk(mu_);
    const std::thread::id me = std::this_thread::get_id();
    while (done_ < t) {
      if (queued_ > 0 && !running_ && queue_[head_].submitter == me) {
        run_next(lk);
      } else {
        if (waiter_runs_ && queued_ > 0 && !running_) queue_cv_.notify_one();  // another thread's: the dispatcher's
        done_cv_.wait(lk);
      }
    }
  }

  // The staging of the f16 and int8 modes (the per-thread panels are sized already). Under
  // the lock with nothing in flight: the dispatcher touches the staging only while it runs
  // a job, and it takes a job only under the lock.
  void reserve_forward(WeightHandle h, int64_t max_tokens, Precision p) override {
    const ResidentMatrix& m = in_mode(h, p);
    std::unique_lock<std::mutex> lk(mu_);
    wait_until_idle(lk);
    if (p == Precision::Int8) make_int8_copy(m);
    out_of_memory_is_an_error("the staging of the inputs", max_tokens, [&] {
      if (p == Precision::F16) grow_f16_staging(max_tokens, m.cols);
      if (p == Precision::Int8) grow_int8_rows(max_tokens, ceil_div(m.cols, engine::kQ8Block), int8_offsets(m));
    });
  }
  void reserve_input_grad(WeightHandle h, int64_t max_tokens, Precision p) override {
    const ResidentMatrix& m = in_mode(h, p);
    std::unique_lock<std::mutex> lk(mu_);
    wait_until_idle(lk);
    if (p == Precision::Int8) make_int8_copy(m);
    out_of_memory_is_an_error("the staging of the output gradients", max_tokens, [&] {
      if (p == Precision::F16) grow_f16_staging(max_tokens, m.rows);
      if (p == Precision::Int8) g8_.grow(max_tokens, m.rows, kMinInt8GradTaskTokens);
      if (p == Precision::Int8 && int8_offsets(m)) grow_grad_offsets(max_tokens, m.cols);
    });
  }

  void release_f32_weights() override {
    std::unique_lock<std::mutex> lk(mu_);
    wait_until_idle(lk);
    for (ResidentMatrix& m : mats_)
      if (m.tiled() && !int8_native(m)) {
        make_int8_copy(m);
        decltype(m.tiles.bytes)().swap(m.tiles.bytes);
        m.released = true;
      }
  }

  size_t resident_weight_bytes() const override {
    size_t n = int8_copy_bytes_.load(std::memory_order_relaxed);
    for (const auto& m : mats_) n += m.weight_bytes();
    return n;
  }
  size_t resident_bytes() const override {
    size_t meta = sizeof(*this) + mats_.capacity() * sizeof(ResidentMatrix);
    return resident_weight_bytes() + meta;
  }

 private:
  struct Job {
    enum Kind { Forward, InputGrad } kind;
    const ResidentMatrix* m;
    const float* in;
    int64_t T;
    float* out;
    Precision precision;
    EngineTicket ticket;
    std::thread::id submitter{};  // the thread that submitted it (see wait)
  };

  void add(const TensorView& v) {
    if (!v.present()) fail(v.name.empty() ? "engine" : v.name, "weight tensor missing", "the model file is incomplete");
    const QTypeInfo& info = qtype_info(v.type);
    if (!info.supported)
      fail(v.name, std::string("weight type ") + info.name + " is not supported by the cpu engine",
           "convert the model to f16, q8_0 or q4_0");
    if (v.ne.size() != 2 || v.cols() % info.block_size != 0)
      fail(v.name, "not a matrix with rows of whole " + std::string(info.name) + " blocks");
    ResidentMatrix m;
    m.rows = v.rows();
    m.cols = v.cols();
    m.type = v.type;
    m.row_bytes = v.row_bytes();
    m.block_size = info.block_size;
    m.block_bytes = info.block_bytes;
    if (engine::has_tiled_layout(v.type, v.cols())) {
      m.tiles = engine::make_tiles(v, &pool_);
      m.tiled_layout = true;
      m.type = m.tiles.type;  // Q5_0 weights are Q8_0 tiles (tile_layout.h)
      m.row_bytes = qtype_row_bytes(m.type, m.cols);
      m.block_bytes = qtype_info(m.type).block_bytes;
      release_file_pages(v);
    } else
      m.row_data = v.data;
    mats_.push_back(std::move(m));
  }

  const ResidentMatrix& at(WeightHandle h) const {
    if (h < 0 || static_cast<size_t>(h) >= mats_.size()) fail("engine", "invalid weight handle " + std::to_string(h));
    return mats_[static_cast<size_t>(h)];
  }

  // h's matrix, for a product or reservation in mode p: not f32 or f16 once its weights were
  // released (release_f32_weights).
  const ResidentMatrix& in_mode(WeightHandle h, Precision p) const {
    const ResidentMatrix& m = at(h);
    if (m.released && p != Precision::Int8)
      fail("engine", std::string(precision_name(p)) + " product on weights released for int8 products only",
           "make the engine again for f32 or f16 products (release_f32_weights keeps only the int8 copies)");
    return m;
  }

  EngineTicket submit(Job job) {
    std::lock_guard<std::mutex> lk(mu_);
    job.ticket = ++issued_;
    job.submitter = std::this_thread::get_id();
    if (queued_ == queue_.size()) {  // full: grow (only past the deepest queue so far)
      std::vector<Job> bigger(queue_.size() * 2);
      for (size_t i = 0; i < queued_; ++i) bigger[i] = queue_[(head_ + i) % queue_.size()];
      queue_.swap(bigger);
      head_ = 0;
    }
    queue_[(head_ + queued_) % queue_.size()] = job;
    ++queued_;
    if (!waiter_runs_) queue_cv_.notify_one();
    return job.ticket;
  }

  void dispatch_loop() {
    std::unique_lock<std::mutex> lk(mu_);
    for (;;) {
      queue_cv_.wait(lk, [&] { return (stop_ && queued_ == 0) || (queued_ > 0 && !running_); });
      if (queued_ == 0) return;  // stop_ and drained
      run_next(lk);
    }
  }

  // Takes the next queued product and runs it, on the dispatcher or in wait: mu_ is held on
  // entry and on return, not while the product runs nor while the waiters are notified.
  // Products do not throw (their inputs are checked at submission): one that did would end
  // the process, as it did on the dispatcher thread.
  void run_next(std::unique_lock<std::mutex>& lk) {
    const Job job = queue_[head_];
    head_ = (head_ + 1) % queue_.size();
    --queued_;
    running_ = true;
    lk.unlock();
    [&]() noexcept { run(job); }();
    lk.lock();
    running_ = false;
    done_ = job.ticket;
    const bool more = queued_ > 0;
    lk.unlock();
    done_cv_.notify_all();
    if (more) queue_cv_.notify_one();
    lk.lock();
  }

  void run(const Job& job) {
    if (job.T <= 0) return;
    switch (job.precision) {
      case Precision::F32: run_f32(job.kind, *job.m, job.in, job.T, job.out); return;
      case Precision::F16: run_f16(job); return;
      case Precision::Int8: run_int8(job); return;
    }
  }

  // Row-group ranges of a matrix-vector product on tiles t: tasks of at least
  // kMatvecMinTaskBytes of tiles (a multiple of `unit` groups), about 4 per thread; body(g0,
  // g1) for each.
  template <class Body>
  void for_matvec_tasks(const engine::TiledMatrix& t, int64_t unit, Body&& body) {
    const int64_t n_groups = t.n_groups();
    const int64_t group_bytes = static_cast<int64_t>(t.bytes.size()) / n_groups;
    int64_t per = std::max(ceil_div(kMatvecMinTaskBytes, group_bytes),
                           ceil_div(n_groups, 4 * static_cast<int64_t>(pool_.size())));
    per = ceil_div(per, unit) * unit;
    pool_.parallel_for(ceil_div(n_groups, per),
                       [&](int64_t i) { body(i * per, std::min(n_groups, (i + 1) * per)); });
  }

  void run_f32(Job::Kind kind, const ResidentMatrix& m, const float* in, int64_t T, float* out) {
    // A few tokens on tiles of whole row groups: the matrix-vector kernels, where the set
    // has one with the panel kernels' summation order (AVX2).
    if (kind == Job::Forward && T <= kMatvecMaxTokens && f32_matvec_runs(m)) {
      // Tasks of whole blocks of 8 groups (the AVX-512 kernel's chains; the AVX2 one takes 4).
      for_matvec_tasks(m.tiles, 8, [&](int64_t g0, int64_t g1) {
        matvec_.f32_tiles(m.tiles, g0, g1, in, m.cols, T, out, m.rows);
      });
      return;
    }
    if (kind == Job::Forward) {
      const int64_t n_tblocks = ceil_div(T, kTokensPerTask);
      const int64_t n_units = ceil_div(m.rows, kForwardTaskRows);
      pool_.parallel_for(n_units * n_tblocks, [&](int64_t i, int worker) {
        const auto [u, tb] = banded_task(i, n_units, n_tblocks, kForwardBandTasks);
        forward_task(kernels_, m, scratch(worker), in, out, u, tb * kTokensPerTask,
                     std::min(T, (tb + 1) * kTokensPerTask));
      });
    } else {
      // Token blocks of kTokensPerTask, as the forward's, even when that leaves fewer blocks
      // than threads (the column ranges then share them out): each task dequantizes its
      // panel once, and splitting 128 tokens into two 64-token blocks did that twice.
      // Measured on Zen 3 (2 threads, 64 and 128 tokens, f32 and f16 modes, the three
      // presets' q/k/gate/down of Q4_K, Q6_K and F16, dX time over the forward's, medians of
      // 3 interleaved runs of each mode, pooled): all 56 cases faster, 1.02-1.26x, mean
      // 1.12x; Q4_0/Q8_0 in f32 mode at 128 tokens a median 1.07x. (The int8 rule:
      // int8_grad_tokens_per_task.)
      const int64_t tpt = std::min(T, kTokensPerTask), ntb = ceil_div(T, tpt);
      const ColumnRanges ranges(kernels_, m, Precision::F32, ntb, pool_.size());
      pool_.parallel_for(ranges.n * ntb, [&](int64_t i, int worker) {
        const auto [cb, tb] = banded_task(i, ranges.n, ntb, kGradBandRanges);
        input_grad_task(kernels_, m, scratch(worker), in, out, ranges.begin(cb), ranges.end(cb), tb * tpt,
                        std::min(T, (tb + 1) * tpt));
      });
    }
  }

  WorkerScratch& scratch(int worker) { return scratch_[static_cast<size_t>(worker)]; }

  // The Q8_0 copy of m if it needs one and has none (kernels_int8.h), a row group per pool
  // task. Under mu_ with no product in flight (reserve_*, need_int8_copy): the pool and the
  // scratch are free, and no product reads the copy while it is made.
  void make_int8_copy(const ResidentMatrix& m) {
    if (int8_native(m) || m.int8_copy) return;
    engine::TiledMatrix c;
    c.type = QType::Q8_0;
    c.rows = m.rows;
    c.cols = ceil_div(m.cols, engine::kQ8Block) * engine::kQ8Block;  // zeros past the last whole block
    c.tile_cols = engine::kTileCols;
    c.block_bytes = sizeof(quant::BlockQ8_0);
    out_of_memory_is_an_error("the int8 copy of the weights", 0, [&] {
      c.bytes.resize(c.block_bytes * static_cast<size_t>(c.n_blocks() * c.rows));
    });
    pool_.parallel_for(c.n_groups(), [&](int64_t g, int worker) {
      float* rows = scratch(worker).floats.data();
      const int64_t nr = c.group_rows(g);
      fill_panel(kernels_, m, g * kTileRows, nr, 0, m.cols, rows, m.cols);
      for (int64_t b = 0; b < c.n_blocks(); ++b) {
        uint8_t* tile = const_cast<uint8_t*>(c.tile(g, b));  // the Q8_0 tile layout (tile_layout.h)
        for (int64_t i = 0; i < nr; ++i) {
          quant::BlockQ8_0 block;
          const int64_t c0 = b * engine::kQ8Block;
          engine::quantize_block_q8_0(rows + i * m.cols + c0, std::min(engine::kQ8Block, m.cols - c0), &block);
          std::memcpy(tile + i * sizeof(block.d), &block.d, sizeof(block.d));
          std::memcpy(tile + nr * sizeof(block.d) + i * sizeof(block.qs), block.qs, sizeof(block.qs));
        }
      }
    });
    int8_copy_bytes_ += c.bytes.size();
    m.int8_copy = std::make_unique<engine::TiledMatrix>(std::move(c));
  }
  // Waits, holding mu_ through lk, until every product submitted so far has run.
  void wait_until_idle(std::unique_lock<std::mutex>& lk) {
    if (waiter_runs_) queue_cv_.notify_one();  // the queue's products run on the dispatcher
    done_cv_.wait(lk, [&] { return done_ >= issued_; });
  }

  // make_int8_copy at an int8 submission, for a caller that reserved nothing: under mu_ once
  // the products in flight are done.
  void need_int8_copy(const ResidentMatrix& m) {
    if (int8_native(m)) return;
    std::unique_lock<std::mutex> lk(mu_);
    if (m.int8_copy) return;
    wait_until_idle(lk);
    make_int8_copy(m);
  }

  // The staging grows only here: from reserve_*, or at a product larger than reserved.
  void grow_f16_staging(int64_t T, int64_t n_in) {
    if (static_cast<int64_t>(staged_.size()) < T * n_in) staged_.resize(static_cast<size_t>(T * n_in));
    if (static_cast<int64_t>(row_scale_.size()) < T) row_scale_.resize(static_cast<size_t>(T));
  }
  // offsets: the product is a Q4_K/Q5_K one from the stored quants, which stages the offset
  // factors z as well (x8_.z: only models with those types allocate it).
  void grow_int8_rows(int64_t T, int64_t blocks, bool offsets) {
    if (offsets && static_cast<int64_t>(x8_.z.size()) < T * blocks) x8_.z.resize(static_cast<size_t>(T * blocks));
    if (static_cast<int64_t>(x8_.d.size()) >= T * blocks) return;
    x8_.q.resize(static_cast<size_t>(T * blocks * engine::kQ8Block));
    x8_.d.resize(static_cast<size_t>(T * blocks));
    x8_.sum.resize(static_cast<size_t>(T * blocks));
  }
  // Q4_K/Q5_K's input-gradient offset sums G: a float per token and column block.
  void grow_grad_offsets(int64_t T, int64_t cols) {
    const int64_t n = T * ceil_div(cols, engine::kQ8Block);
    if (static_cast<int64_t>(grad_offsets_.size()) < n) grad_offsets_.resize(static_cast<size_t>(n));
  }
  static bool int8_offsets(const ResidentMatrix& m) { return engine::int8_has_offsets(m.type) && int8_native(m); }

  // Runs body(t0, t1) over token ranges of a few rows, on the pool (row-wise passes).
  template <class Body>
  void for_token_ranges(int64_t T, Body&& body) {
    constexpr int64_t kRows = 8;
    pool_.parallel_for((T + kRows - 1) / kRows, [&](int64_t i) { body(i * kRows, std::min(T, (i + 1) * kRows)); });
  }

  void run_f16(const Job& job) {
    const ResidentMatrix& m = *job.m;
    const int64_t T = job.T;
    const int64_t n_in = job.kind == Job::Forward ? m.cols : m.rows;
    const int64_t n_out = job.kind == Job::Forward ? m.rows : m.cols;
    grow_f16_staging(T, n_in);
    for_token_ranges(T, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t)
        row_scale_[static_cast<size_t>(t)] =
            engine::guard_input_row(f16_, job.in + t * n_in, n_in, staged_.data() + t * n_in);
    });
    run_f32(job.kind, m, staged_.data(), T, job.out);
    for_token_ranges(T, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t)
        engine::guard_output_row(f16_, job.out + t * n_out, n_out, row_scale_[static_cast<size_t>(t)]);
    });
  }

  // Whether this set's f32 matrix-vector kernel takes m's few-token forward products.
  bool f32_matvec_runs(const ResidentMatrix& m) const {
    return matvec_.f32_tiles && m.tiled() && m.rows % kTileRows == 0;
  }

  void run_int8(const Job& job) {
    const ResidentMatrix& m = *job.m;
    const int64_t T = job.T;
    if (job.kind == Job::Forward) {
      const int64_t cols = m.cols, blocks = (cols + engine::kQ8Block - 1) / engine::kQ8Block;
      x8_.blocks = blocks;
      grow_int8_rows(T, blocks, int8_offsets(m));
      for_token_ranges(T, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t)
          int8_.quantize_row(job.in + t * cols, cols, x8_.q.data() + t * blocks * engine::kQ8Block,
                             x8_.d.data() + t * blocks, x8_.sum.data() + t * blocks);
      });
      if (int8_offsets(m))
        engine::forward_offset_factors(x8_.d.data(), x8_.sum.data(), T * blocks, x8_.z.data());
      if (T <= kMatvecMaxTokens) {  // one token (or a few): matrix-vector kernels, every tile type
        const float* z = int8_offsets(m) ? x8_.z.data() : nullptr;
        for_matvec_tasks(int8_tiles(m), 1, [&](int64_t g0, int64_t g1) {
          matvec_.int8_tiles(int8_tiles(m), g0, g1, x8_.q.data(), x8_.d.data(), x8_.sum.data(), z, T, job.out, m.rows);
        });
        return;
      }
      // Tasks of four row groups where the set has forward_quad (the last task's 1-3 groups
      // go in a pair and a single), else of two.
      const int64_t n_groups = ceil_div(m.rows, kTileRows), per_task = int8_.forward_quad ? 4 : 2;
      const int64_t n_units = ceil_div(n_groups, per_task), n_tblocks = ceil_div(T, kInt8TokensPerTask);
      pool_.parallel_for(n_units * n_tblocks, [&](int64_t i, int worker) {
        const int64_t g = i / n_tblocks * per_task, tb = i % n_tblocks, ng = std::min(per_task, n_groups - g);
        const int64_t t0 = tb * kInt8TokensPerTask, t1 = std::min(T, t0 + kInt8TokensPerTask);
        if (ng == 4 || ng <= 2) {
          forward_task_int8(int8_, m, scratch(worker), x8_, job.out, g, ng, t0, t1);
        } else {
          forward_task_int8(int8_, m, scratch(worker), x8_, job.out, g, 2, t0, t1);
          forward_task_int8(int8_, m, scratch(worker), x8_, job.out, g + 2, ng - 2, t0, t1);
        }
      });
    } else {
      const int64_t tpt = int8_grad_tokens_per_task(kernels_, m, T, pool_.size()), ntb = ceil_div(T, tpt);
      g8_.grow(T, m.rows, kMinInt8GradTaskTokens);
      g8_.start(job.in, m.rows, T, tpt);
      const ColumnRanges ranges(kernels_, m, Precision::Int8, ntb, pool_.size());
      // Each thread takes tasks in order (column range, then token block) until none is left,
      // then steals from the threads still running (steal_int8_grad_work).
      const int64_t n_tasks = ranges.n * ntb;
      std::atomic<int64_t> next{0};
      pool_.parallel_for(pool_.size(), [&](int64_t, int worker) {
        for (int64_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < n_tasks;) {
          const int64_t cb = i / ntb, tb = i % ntb;
          const Int8GradTask task{ranges.begin(cb), ranges.end(cb), tb, tb * tpt, std::min(T, (tb + 1) * tpt), 0};
          input_grad_task_int8(int8_, m, scratch(worker), g8_, job.out, task, grad_slots_.get(), worker);
        }
        steal_int8_grad_work(int8_, m, scratch(worker), g8_, job.out, grad_slots_.get(), pool_.size(),
                             worker, tpt, T);
      });
      if (int8_offsets(m)) add_grad_offsets(m, job.in, T, job.out);
    }
  }

  // Q4_K/Q5_K's input-gradient offsets (kernels_int8.h): dX[t,c] += G[t,b], G[t,b] = the chain
  // over all rows of c[r,b] dY[t,r]. Each task takes a range of super-blocks (8 column
  // blocks) and of tokens; it unpacks its super-blocks' offsets kOffsetSlabRows rows at a time
  // (a slab of C, in its scratch) and carries its chains of G on through the slabs.
  void add_grad_offsets(const ResidentMatrix& m, const float* dY, int64_t T, float* dX) {
    const int64_t rows = m.rows, cols = m.cols, nsb = cols / engine::kSuperTileCols, nb = nsb * 8;
    const int64_t threads = pool_.size(), n_sb = std::min(nsb, threads), n_t = std::min(T, ceil_div(threads, n_sb));
    grow_grad_offsets(T, cols);  // (reserved already unless the product is larger)
    float* G = grad_offsets_.data();
    pool_.parallel_for(n_sb * n_t, [&](int64_t i, int worker) {
      const int64_t s0 = i / n_t * nsb / n_sb, s1 = (i / n_t + 1) * nsb / n_sb;
      const int64_t t0 = i % n_t * T / n_t, t1 = (i % n_t + 1) * T / n_t;
      const int64_t b0 = s0 * 8, nbs = (s1 - s0) * 8;
      std::vector<float>& C = scratch(worker).offset_slab;
      if (static_cast<int64_t>(C.size()) < kOffsetSlabRows * nbs)  // (sized already by reserve_for)
        C.resize(static_cast<size_t>(kOffsetSlabRows * nbs));
      for (int64_t t = t0; t < t1; ++t) std::fill_n(G + t * nb + b0, nbs, 0.0f);
      const float mid = engine::kquant_mid(m.type);
      for (int64_t r0 = 0; r0 < rows; r0 += kOffsetSlabRows) {
        const int64_t nr = std::min(kOffsetSlabRows, rows - r0);
        for (int64_t g = r0 / kTileRows; g * kTileRows < r0 + nr; ++g)  // a row group's tiles are one run
          for (int64_t sb = s0; sb < s1; ++sb) {
            const uint8_t* tile = m.tiles.tile(g, sb);
            for (int64_t i = 0; i < m.tiles.group_rows(g); ++i) {
              const engine::KQuantBlockScales sc =
                  engine::kquant_block_scales(tile + static_cast<size_t>(i) * m.tiles.block_bytes, mid);
              std::copy_n(sc.c, 8, C.data() + (g * kTileRows + i - r0) * nbs + (sb - s0) * 8);
            }
          }
        int8_.grad_offset_sums(dY + t0 * rows + r0, rows, t1 - t0, nr, C.data(), nbs, nbs, G + t0 * nb + b0, nb);
      }
      int8_.spread_grad_offsets(G + t0 * nb + b0, nb, t1 - t0, nbs, dX + t0 * cols + b0 * engine::kQ8Block, cols);
    });
  }

  const engine::PanelKernels& kernels_;
  const engine::Int8Kernels& int8_;
  const engine::MatvecKernels& matvec_;
  const engine::F16Kernels& f16_;
  ThreadPool pool_;
  std::vector<WorkerScratch> scratch_;  // one per pool thread, by worker index
  // Staging of the f16 and int8 modes, reused by every product (products run one at a time,
  // on the dispatcher thread): activation-sized, never weight-sized.
  std::vector<float> staged_;
  std::vector<float> grad_offsets_;  // Q4_K/Q5_K input gradients: G, tokens x column blocks
  std::vector<int> row_scale_;
  Int8Rows x8_;
  Int8GradRows g8_;
  std::unique_ptr<GradTaskSlot[]> grad_slots_ = std::make_unique<GradTaskSlot[]>(static_cast<size_t>(pool_.size()));
  int64_t n_layer_ = 0;
  std::vector<ResidentMatrix> mats_;
  std::atomic<size_t> int8_copy_bytes_{0};  // of the matrices' Q8_0 copies (resident_weight_bytes)

  std::mutex mu_;
  std::condition_variable queue_cv_, done_cv_;
  // Submitted jobs not yet run, a ring: a std::deque would allocate a node every few
  // submits, and a training step must not allocate (tests/host/step_runtime_test.cpp).
  std::vector<Job> queue_ = std::vector<Job>(64);
  size_t head_ = 0, queued_ = 0;
  EngineTicket issued_ = 0, done_ = 0;
  bool running_ = false;  // a product is running (on the dispatcher or in wait)
  bool stop_ = false;
  std::thread dispatcher_;
  const bool waiter_runs_;  // EngineOptions::waiter_runs_products
};

}  // namespace

std::unique_ptr<FrozenEngine> make_cpu_engine(const Model& model, const EngineOptions& opt) {
  return std::make_unique<CpuEngine>(model, opt);
}

}  // namespace nl
