// The cpu backend. Its resident layout is made once at load: Q4_0 and Q8_0 matrices are
// repacked into 8-row tiles (tile_layout.h, exactly the quantized bytes); other types keep
// their quantized rows as the model stores them. Both products dequantize a few rows at a
// time into a per-thread "panel" (through the same dequantizer) and use it for a whole
// block of tokens, so the work is a GEMM per task, not a GEMV per token:
//  - forward: tasks are (8-row group x token block); each Y element is one dot product over
//    the full row, computed by one task.
//  - input grad: tasks are (column block x token block), column blocks aligned to the
//    quantization block so a task dequantizes only its slice of each row; each task adds
//    the row groups' contributions into its own slice of dX, rows in increasing order.
// No thread ever writes another's outputs, so no locks, no transposed copy, and results do
// not depend on the thread count. With the scalar kernels the summation order is the one
// of reference_products.h (bit-identical); the SIMD kernels agree with it to rounding.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "backends.h"
#include "kernels.h"
#include "tile_layout.h"
#include "nightlora/engine/reference_products.h"
#include "nightlora/util/thread_pool.h"
#include "nightlora/quant/qtype.h"
#include "nightlora/util/error.h"

namespace nl {
namespace {

using engine::kTileRows;

constexpr int64_t kTokensPerTask = 64;
constexpr int64_t kColsPerTask = 256;  // rounded to the quantization block

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
  bool tiled() const { return !tiles.bytes.empty(); }
  size_t weight_bytes() const { return tiled() ? tiles.bytes.size() : row_bytes * static_cast<size_t>(rows); }
  const uint8_t* row(int64_t r) const { return row_data + static_cast<size_t>(r) * row_bytes; }
};

// A panel of up to kTileRows dequantized rows per thread, reused across products.
float* scratch_panel(int64_t n) {
  thread_local std::vector<float> buf;
  if (static_cast<int64_t>(buf.size()) < n) buf.resize(static_cast<size_t>(n));
  return buf.data();
}

// Rows [r0, r0 + nr) (one row group), columns [c0, c1) (block aligned) of W as floats.
void fill_panel(const engine::PanelKernels& k, const ResidentMatrix& m, int64_t r0, int64_t nr, int64_t c0,
                int64_t c1, float* panel, int64_t ld) {
  if (m.tiled()) {
    k.dequantize_tiles(m.tiles, r0 / kTileRows, c0 / engine::kTileCols, c1 / engine::kTileCols, panel, ld);
    return;
  }
  const size_t slice_offset = static_cast<size_t>(c0 / m.block_size) * m.block_bytes;
  for (int64_t i = 0; i < nr; ++i) dequantize_row(m.type, m.row(r0 + i) + slice_offset, panel + i * ld, c1 - c0);
}

void forward_task(const engine::PanelKernels& k, const ResidentMatrix& m, const float* X, float* Y, int64_t g,
                  int64_t t0, int64_t t1) {
  const int64_t rows = m.rows, cols = m.cols;
  const int64_t r0 = g * kTileRows, nr = std::min(kTileRows, rows - r0);
  float* panel = scratch_panel(nr * cols);
  fill_panel(k, m, r0, nr, 0, cols, panel, cols);
  k.forward(X + t0 * cols, cols, t1 - t0, panel, cols, nr, cols, Y + t0 * rows + r0, rows);
}

void input_grad_task(const engine::PanelKernels& k, const ResidentMatrix& m, const float* dY, float* dX, int64_t c0,
                     int64_t c1, int64_t t0, int64_t t1) {
  const int64_t rows = m.rows, cols = m.cols, n = c1 - c0;
  float* panel = scratch_panel(kTileRows * n);
  for (int64_t t = t0; t < t1; ++t) std::memset(dX + t * cols + c0, 0, static_cast<size_t>(n) * sizeof(float));
  for (int64_t r0 = 0; r0 < rows; r0 += kTileRows) {
    const int64_t nr = std::min(kTileRows, rows - r0);
    fill_panel(k, m, r0, nr, c0, c1, panel, n);
    k.input_grad(dY + t0 * rows + r0, rows, t1 - t0, panel, n, nr, n, dX + t0 * cols + c0, cols);
  }
}

class CpuEngine final : public FrozenEngine {
 public:
  CpuEngine(const Model& model, const EngineOptions& opt)
      : kernels_(engine::select_kernels(opt.isa)), pool_(opt.threads) {
    const ModelConfig& cfg = model.config;
    n_layer_ = cfg.n_layer;
    if (static_cast<int64_t>(model.weights.layers.size()) != n_layer_)
      fail(model.source_path, "model has " + std::to_string(model.weights.layers.size()) + " layers, config says " +
                                  std::to_string(n_layer_));
    for (int64_t l = 0; l < n_layer_; ++l)
      for (int p = 0; p < kNumProj; ++p) add(model.weights.layers[static_cast<size_t>(l)].proj(static_cast<Proj>(p)));
    add(model.weights.output.present() ? model.weights.output : model.weights.tok_embd);
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
  std::string isa() const override { return kernels_.isa; }

  WeightHandle handle(int64_t layer, Proj p) const override {
    if (layer < 0 || layer >= n_layer_) fail("engine", "layer " + std::to_string(layer) + " out of range");
    return static_cast<WeightHandle>(layer * kNumProj + static_cast<int>(p));
  }
  WeightHandle output_handle() const override { return static_cast<WeightHandle>(n_layer_ * kNumProj); }
  int64_t rows(WeightHandle h) const override { return at(h).rows; }
  int64_t cols(WeightHandle h) const override { return at(h).cols; }

  EngineTicket submit_forward(WeightHandle h, const float* X, int64_t T, float* Y,
                              Precision p = Precision::F32) override {
    return submit(Job{Job::Forward, &at(h), X, T, Y, p, 0});
  }
  EngineTicket submit_input_grad(WeightHandle h, const float* dY, int64_t T, float* dX,
                                 Precision p = Precision::F32) override {
    return submit(Job{Job::InputGrad, &at(h), dY, T, dX, p, 0});
  }

  void wait(EngineTicket t) override {
    std::unique_lock<std::mutex> lk(mu_);
    done_cv_.wait(lk, [&] { return done_ >= t; });
  }

  size_t resident_weight_bytes() const override {
    size_t n = 0;
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
    Precision precision;  // work in progress: f16 and int8 kernels land in the next commits
    EngineTicket ticket;
  };

  // The tiles are now the only copy the engine reads; the file pages just read to make them
  // would stay resident (a second copy of the weights). Hand them back to the kernel:
  // MADV_PAGEOUT never changes what the memory holds (a later read, e.g. the embedding
  // lookup of a tied head, faults the bytes in again). Best effort; whole pages only.
  static void release_file_pages(const TensorView& v) {
#ifdef MADV_PAGEOUT
    const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
    const uintptr_t begin = (reinterpret_cast<uintptr_t>(v.data) + page - 1) / page * page;
    const uintptr_t end = (reinterpret_cast<uintptr_t>(v.data) + v.nbytes) / page * page;
    if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_PAGEOUT);
#else
    (void)v;
#endif
  }

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
    if (engine::has_tiled_layout(v.type)) {
      m.tiles = engine::make_tiles(v);
      release_file_pages(v);
    } else
      m.row_data = v.data;
    mats_.push_back(std::move(m));
  }

  const ResidentMatrix& at(WeightHandle h) const {
    if (h < 0 || static_cast<size_t>(h) >= mats_.size()) fail("engine", "invalid weight handle " + std::to_string(h));
    return mats_[static_cast<size_t>(h)];
  }

  EngineTicket submit(Job job) {
    std::lock_guard<std::mutex> lk(mu_);
    job.ticket = ++issued_;
    queue_.push_back(job);
    queue_cv_.notify_one();
    return job.ticket;
  }

  void dispatch_loop() {
    for (;;) {
      Job job;
      {
        std::unique_lock<std::mutex> lk(mu_);
        queue_cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stop_ and drained
        job = queue_.front();
        queue_.pop_front();
      }
      run(job);
      {
        std::lock_guard<std::mutex> lk(mu_);
        done_ = job.ticket;
      }
      done_cv_.notify_all();
    }
  }

  void run(const Job& job) {
    const ResidentMatrix& m = *job.m;
    const int64_t T = job.T;
    if (T <= 0) return;
    const int64_t n_tblocks = (T + kTokensPerTask - 1) / kTokensPerTask;
    if (job.kind == Job::Forward) {
      const int64_t n_groups = (m.rows + kTileRows - 1) / kTileRows;
      pool_.parallel_for(n_groups * n_tblocks, [&](int64_t i) {
        const int64_t g = i / n_tblocks, tb = i % n_tblocks;
        forward_task(kernels_, m, job.in, job.out, g, tb * kTokensPerTask, std::min(T, (tb + 1) * kTokensPerTask));
      });
    } else {
      const int64_t cols = m.cols;
      const int64_t cb_size = std::max<int64_t>(m.block_size, kColsPerTask / m.block_size * m.block_size);
      const int64_t n_cblocks = (cols + cb_size - 1) / cb_size;
      pool_.parallel_for(n_cblocks * n_tblocks, [&](int64_t i) {
        const int64_t cb = i / n_tblocks, tb = i % n_tblocks;
        input_grad_task(kernels_, m, job.in, job.out, cb * cb_size, std::min(cols, (cb + 1) * cb_size),
                        tb * kTokensPerTask, std::min(T, (tb + 1) * kTokensPerTask));
      });
    }
  }

  const engine::PanelKernels& kernels_;
  ThreadPool pool_;
  int64_t n_layer_ = 0;
  std::vector<ResidentMatrix> mats_;

  std::mutex mu_;
  std::condition_variable queue_cv_, done_cv_;
  std::deque<Job> queue_;
  EngineTicket issued_ = 0, done_ = 0;
  bool stop_ = false;
  std::thread dispatcher_;
};

}  // namespace

std::unique_ptr<FrozenEngine> make_cpu_engine(const Model& model, const EngineOptions& opt) {
  return std::make_unique<CpuEngine>(model, opt);
}

}  // namespace nl
