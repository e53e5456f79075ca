// The frozen engine (the papers' NPU): owns the frozen base weights in one resident layout
// made once at load, and serves the three products a LoRA step needs from those same bytes:
//   forward / recompute   Y  = X · Wᵀ      (X: T x in, Y: T x out)
//   input gradient        dX = dY · W      (dY: T x out, dX: T x in)
// The input gradient reads the resident (quantized) tiles with the same dequantizer as the
// forward product: no transposed copy and no full dequantized copy of W ever exists.
// Calls are asynchronous: submit returns a ticket, wait() blocks until it is done, so the
// host can compute the LoRA branch meanwhile.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nightlora/modelio/model.h"

namespace nl {

struct EngineOptions {
  std::string backend = "cpu";  // "cpu", "vulkan", or "auto" (vulkan when a GPU is present, else cpu)
  int threads = 0;              // 0: all cores
  // Kernel instruction set of the cpu backend: "auto" (the best this CPU runs; the
  // environment variable NL_ENGINE_ISA=scalar|avx2 overrides it), "scalar" or "avx2", or a
  // name as isa() reports it, which also fixes the int8 kernel set ("avx2, int8 avx2-vnni").
  std::string isa = "auto";
  // cpu backend: products wait in the queue until a thread waits for them, which then runs
  // them itself (the dispatcher thread is woken only for products of other threads). For a
  // caller that waits for each product right away, as a decoder does: two thread wake-ups
  // less per product. One that works while products run (the training step) keeps false.
  bool waiter_runs_products = false;
};

// Numeric mode of one frozen product; the precision plan picks one per (layer, projection, product).
//  F32:  f32 activations, f32 accumulation.
//  F16:  activations and outputs stored as f16 (as accelerators store them), each output row
//        scaled by a power of two chosen from its magnitude (the range guard) so it neither
//        overflows nor flushes to zero, unscaled in f32 afterwards; f32 accumulation.
//  Int8: activations quantized to int8 per row/block, integer dot products.
// Every backend accepts all three modes for every weight type it supports.
enum class Precision : uint8_t { F32 = 0, F16 = 1, Int8 = 2 };
const char* precision_name(Precision p);          // "f32" | "f16" | "int8"
Precision parse_precision(const std::string& s);  // throws nl::Error naming the accepted values

// Time the products spent on a backend's own device clock (Vulkan timestamp queries), summed
// over the products completed since the engine was made; `measured` is false for backends
// that run on the host's threads (cpu) or devices without timestamps. A step-time breakdown
// takes differences of two readings; the host's time blocked in wait() is measured apart.
struct EngineDeviceTime {
  bool measured = false;
  double forward_s = 0;     // forward / recompute products
  double input_grad_s = 0;  // input-gradient products
  int64_t products = 0;     // products completed
};

// A resident matrix: one of the seven projections of a layer, or the output head.
using WeightHandle = int32_t;
// Identifies a submitted product; tickets grow with each submit.
using EngineTicket = uint64_t;

class FrozenEngine {
 public:
  virtual ~FrozenEngine() = default;

  virtual std::string backend() const = 0;
  virtual int threads() const = 0;
  // The instruction set its kernels use ("scalar", "avx2", ...), on the cpu backend with
  // its int8 kernel set where that is not implied ("avx2, int8 avx512-vnni").
  virtual std::string isa() const { return "scalar"; }
  // The modes in which this engine computes the products of matrix h in less time than in
  // f32, cheapest first: the ones precision calibration tries for it. An accelerator stores
  // f16 and multiplies int8 natively: int8, f16.
  virtual std::vector<Precision> cheaper_modes(WeightHandle) const { return {Precision::Int8, Precision::F16}; }

  // Handles of the resident matrices (valid for the engine's lifetime).
  virtual WeightHandle handle(int64_t layer, Proj p) const = 0;
  virtual WeightHandle output_handle() const = 0;
  virtual int64_t rows(WeightHandle h) const = 0;  // out features
  virtual int64_t cols(WeightHandle h) const = 0;  // in features

  // Y (T x rows) = X (T x cols) · Wᵀ. Y is overwritten. X and Y must stay valid and
  // untouched until wait() on the returned ticket returns.
  // `p` is the numeric mode of this product (see Precision); the default is plain f32.
  virtual EngineTicket submit_forward(WeightHandle h, const float* X, int64_t T, float* Y,
                                      Precision p = Precision::F32) = 0;
  // dX (T x cols) = dY (T x rows) · W. dX is overwritten. Same lifetime rule.
  virtual EngineTicket submit_input_grad(WeightHandle h, const float* dY, int64_t T, float* dX,
                                         Precision p = Precision::F32) = 0;
  // Blocks until the product with this ticket (and every earlier one) is done.
  virtual void wait(EngineTicket t) = 0;

  // The caller will submit forward (input-gradient) products on h of at most max_tokens
  // tokens in mode p: the backend makes now whatever scratch they need, so that those
  // products allocate nothing (a training step's rule, tests/host/step_runtime_test.cpp).
  // Waits for the products in flight first. Optional: a larger product still runs (it may
  // allocate). The default does nothing, for backends whose products need no host scratch.
  virtual void reserve_forward(WeightHandle h, int64_t max_tokens, Precision p) { (void)h, (void)max_tokens, (void)p; }
  virtual void reserve_input_grad(WeightHandle h, int64_t max_tokens, Precision p) {
    (void)h, (void)max_tokens, (void)p;
  }

  // The caller runs int8 products only from now on: the engine frees what only the f32 and
  // f16 modes read, once each matrix has what its int8 products need (the cpu engine: the
  // tiles of F16/F32/BF16/Q4_1/Q5_1 matrices, whose int8 products take their Q8_0 copy,
  // 2 bytes per F16 weight of the 3.06 an int8 decoder held). A later f32 or f16 product or
  // reservation fails. Waits for the products in flight first. An int8 decoder on an engine
  // of its own calls it after loading. The default frees nothing.
  virtual void release_f32_weights() {}

  // Bytes the engine keeps for the base weights: the resident weight bytes plus its own
  // metadata (handles, shapes). Scratch used while a product runs is not included; it is
  // a few rows per thread, never a whole matrix.
  virtual size_t resident_bytes() const = 0;
  // The resident weight bytes alone (for the cpu backend: the quantized rows as stored, and
  // the Q8_0 copies its int8 products made of the others).
  virtual size_t resident_weight_bytes() const = 0;

  // Device time of the completed products (see EngineDeviceTime).
  virtual EngineDeviceTime device_time() const { return {}; }

  // Synchronous conveniences.
  void forward(WeightHandle h, const float* X, int64_t T, float* Y, Precision p = Precision::F32) {
    wait(submit_forward(h, X, T, Y, p));
  }
  void input_grad(WeightHandle h, const float* dY, int64_t T, float* dX, Precision p = Precision::F32) {
    wait(submit_input_grad(h, dY, T, dX, p));
  }
};

// Creates the engine for `model`, loading every projection matrix once into its resident
// layout. Throws nl::Error for an unknown backend or unsupported weight type.
std::unique_ptr<FrozenEngine> make_engine(const Model& model, const EngineOptions& opt);

// The backends this build has ("cpu", and "vulkan" where it was built with Vulkan).
std::vector<std::string> engine_backends_built();
// The kernel sets a cpu engine made with `isa` ("auto": this CPU's best, or the
// NL_ENGINE_ISA / NL_INT8_VNNI overrides) runs, as its isa() names them ("avx2, int8
// avx512-vnni"). Throws nl::Error for a set this build or CPU cannot run.
std::string cpu_engine_isa(const std::string& isa = "auto");

}  // namespace nl
