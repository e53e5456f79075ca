// The cpu backend. Its resident layout is the quantized rows exactly as the model stores
// them (the memory-mapped file): the resident weight memory is the quantized size. Both
// products walk those rows with nl::dequantize_row into a per-thread scratch of at most one
// row, and use each dequantized row for a whole block of tokens:
//  - forward: tasks are (row block x token block); each Y element is one dot product.
//  - input grad: tasks are (column block x token block), column blocks aligned to the
//    quantization block so a task dequantizes only its slice of each row; each task adds
//    row r's contribution dY[t,r]·W[r,c0:c1] into its own slice of dX, for every row in
//    order. No thread ever writes another's outputs, so no locks and no transposed copy.
// The per-element summation order is the one of reference_products.h, so results are
// bit-identical to the scalar reference and independent of the thread count.
#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "backends.h"
#include "nightlora/engine/reference_products.h"
#include "nightlora/util/thread_pool.h"
#include "nightlora/quant/qtype.h"
#include "nightlora/util/error.h"

namespace nl {
namespace {

constexpr int64_t kRowsPerTask = 16;
constexpr int64_t kTokensPerTask = 64;
constexpr int64_t kColsPerTask = 256;  // rounded to the quantization block

struct ResidentMatrix {
  TensorView view;
  int64_t block_size = 1;
  size_t block_bytes = 4;
};

// One row's worth of floats per thread, reused across products.
float* scratch_row(int64_t n) {
  thread_local std::vector<float> buf;
  if (static_cast<int64_t>(buf.size()) < n) buf.resize(static_cast<size_t>(n));
  return buf.data();
}

void forward_tile(const ResidentMatrix& m, const float* X, float* Y, int64_t r0, int64_t r1, int64_t t0,
                  int64_t t1) {
  const int64_t rows = m.view.rows(), cols = m.view.cols();
  float* w = scratch_row(cols);
  for (int64_t r = r0; r < r1; ++r) {
    dequantize_row(m.view.type, m.view.row(r), w, cols);
    for (int64_t t = t0; t < t1; ++t) Y[t * rows + r] = dot_f32(X + t * cols, w, cols);
  }
}

void input_grad_tile(const ResidentMatrix& m, const float* dY, float* dX, int64_t c0, int64_t c1, int64_t t0,
                     int64_t t1) {
  const int64_t rows = m.view.rows(), cols = m.view.cols(), n = c1 - c0;
  const size_t slice_offset = static_cast<size_t>(c0 / m.block_size) * m.block_bytes;
  float* w = scratch_row(n);
  for (int64_t t = t0; t < t1; ++t) std::memset(dX + t * cols + c0, 0, static_cast<size_t>(n) * sizeof(float));
  for (int64_t r = 0; r < rows; ++r) {
    dequantize_row(m.view.type, m.view.row(r) + slice_offset, w, n);
    for (int64_t t = t0; t < t1; ++t) {
      const float a = dY[t * rows + r];
      float* dx = dX + t * cols + c0;
      for (int64_t c = 0; c < n; ++c) dx[c] += a * w[c];
    }
  }
}

class CpuEngine final : public FrozenEngine {
 public:
  CpuEngine(const Model& model, int threads) : pool_(threads) {
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

  WeightHandle handle(int64_t layer, Proj p) const override {
    if (layer < 0 || layer >= n_layer_) fail("engine", "layer " + std::to_string(layer) + " out of range");
    return static_cast<WeightHandle>(layer * kNumProj + static_cast<int>(p));
  }
  WeightHandle output_handle() const override { return static_cast<WeightHandle>(n_layer_ * kNumProj); }
  int64_t rows(WeightHandle h) const override { return at(h).view.rows(); }
  int64_t cols(WeightHandle h) const override { return at(h).view.cols(); }

  EngineTicket submit_forward(WeightHandle h, const float* X, int64_t T, float* Y) override {
    return submit(Job{Job::Forward, &at(h), X, T, Y, 0});
  }
  EngineTicket submit_input_grad(WeightHandle h, const float* dY, int64_t T, float* dX) override {
    return submit(Job{Job::InputGrad, &at(h), dY, T, dX, 0});
  }

  void wait(EngineTicket t) override {
    std::unique_lock<std::mutex> lk(mu_);
    done_cv_.wait(lk, [&] { return done_ >= t; });
  }

  size_t resident_weight_bytes() const override {
    size_t n = 0;
    for (const auto& m : mats_) n += m.view.nbytes;
    return n;
  }
  size_t resident_bytes() const override {
    size_t meta = sizeof(*this) + mats_.capacity() * sizeof(ResidentMatrix);
    for (const auto& m : mats_) meta += m.view.name.capacity() + m.view.ne.capacity() * sizeof(int64_t);
    return resident_weight_bytes() + meta;
  }

 private:
  struct Job {
    enum Kind { Forward, InputGrad } kind;
    const ResidentMatrix* m;
    const float* in;
    int64_t T;
    float* out;
    EngineTicket ticket;
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
    m.view = v;
    m.block_size = info.block_size;
    m.block_bytes = info.block_bytes;
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
      const int64_t rows = m.view.rows();
      const int64_t n_rblocks = (rows + kRowsPerTask - 1) / kRowsPerTask;
      pool_.parallel_for(n_rblocks * n_tblocks, [&](int64_t i) {
        const int64_t rb = i / n_tblocks, tb = i % n_tblocks;
        forward_tile(m, job.in, job.out, rb * kRowsPerTask, std::min(rows, (rb + 1) * kRowsPerTask),
                     tb * kTokensPerTask, std::min(T, (tb + 1) * kTokensPerTask));
      });
    } else {
      const int64_t cols = m.view.cols();
      const int64_t cb_size = std::max<int64_t>(m.block_size, kColsPerTask / m.block_size * m.block_size);
      const int64_t n_cblocks = (cols + cb_size - 1) / cb_size;
      pool_.parallel_for(n_cblocks * n_tblocks, [&](int64_t i) {
        const int64_t cb = i / n_tblocks, tb = i % n_tblocks;
        input_grad_tile(m, job.in, job.out, cb * cb_size, std::min(cols, (cb + 1) * cb_size), tb * kTokensPerTask,
                        std::min(T, (tb + 1) * kTokensPerTask));
      });
    }
  }

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

std::unique_ptr<FrozenEngine> make_cpu_engine(const Model& model, int threads) {
  return std::make_unique<CpuEngine>(model, threads);
}

}  // namespace nl
