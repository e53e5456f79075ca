// A FrozenEngine wrapper for precision calibration: it records the products of a reference
// pass and serves them again in later passes, as long as those passes are still doing exactly
// what the reference did.
//
// Calibration runs the same training step many times, each time with one product in a cheaper
// mode. The host code is deterministic, so every product a pass submits BEFORE its first
// product in a non-reference mode receives the same inputs as in the reference pass and would
// compute the same output: those are copied from the recording instead of computed (for an
// input-gradient product of layer l, that is the whole forward pass, the output head and the
// backward of the layers above l). From the first product whose mode, matrix, size or input
// differs from the recording on, everything is computed. Inputs are compared by a 64-bit hash
// as a guard: determinism makes them equal, and a difference only means computing.
#pragma once
#include <cstdint>
#include <mutex>
#include <vector>

#include "nightlora/engine/frozen_engine.h"

namespace nl {

class ReplayEngine final : public FrozenEngine {
 public:
  // Keeps at most `cap_bytes` of recorded outputs; products past it are always computed.
  ReplayEngine(FrozenEngine& inner, size_t cap_bytes) : inner_(inner), cap_bytes_(cap_bytes) {}

  // The next pass is the reference: compute everything and record it (drops any recording).
  void start_recording();
  // The next pass may reuse the recording up to its first differing product.
  void start_replay();

  int64_t replayed() const { return replayed_; }  // products served from the recording
  int64_t computed() const { return computed_; }  // products computed by the inner engine

  std::string backend() const override { return inner_.backend(); }
  int threads() const override { return inner_.threads(); }
  std::string isa() const override { return inner_.isa(); }
  std::vector<Precision> cheaper_modes(WeightHandle h) const override { return inner_.cheaper_modes(h); }
  WeightHandle handle(int64_t layer, Proj p) const override { return inner_.handle(layer, p); }
  WeightHandle output_handle() const override { return inner_.output_handle(); }
  int64_t rows(WeightHandle h) const override { return inner_.rows(h); }
  int64_t cols(WeightHandle h) const override { return inner_.cols(h); }
  EngineTicket submit_forward(WeightHandle h, const float* X, int64_t T, float* Y, Precision p) override;
  EngineTicket submit_input_grad(WeightHandle h, const float* dY, int64_t T, float* dX, Precision p) override;
  void wait(EngineTicket t) override;
  void reserve_forward(WeightHandle h, int64_t max_tokens, Precision p) override {
    inner_.reserve_forward(h, max_tokens, p);
  }
  void reserve_input_grad(WeightHandle h, int64_t max_tokens, Precision p) override {
    inner_.reserve_input_grad(h, max_tokens, p);
  }
  size_t resident_bytes() const override { return inner_.resident_bytes(); }
  size_t resident_weight_bytes() const override { return inner_.resident_weight_bytes(); }
  EngineDeviceTime device_time() const override { return inner_.device_time(); }

 private:
  struct Call {
    WeightHandle h = 0;
    bool input_grad = false;
    int64_t T = 0;
    Precision mode = Precision::F32;
    uint64_t input_hash = 0;
    bool stored = false;
    std::vector<float> out;  // the output, when stored
  };
  // A submitted product: the inner engine's ticket to wait for (if it went there), and where
  // its output lands, to be copied into the recording once it is done.
  struct Pending {
    bool on_inner = false;
    EngineTicket inner = 0;
    int64_t record = -1;  // index into calls_ to fill, or -1
    const float* out = nullptr;
    size_t n = 0;
  };

  EngineTicket all_submitted();  // the last ticket handed out
  EngineTicket submit(WeightHandle h, bool input_grad, const float* in, int64_t n_in, int64_t T, float* out,
                      int64_t n_out, Precision p);

  FrozenEngine& inner_;
  size_t cap_bytes_;
  // The step's timing wrapper (timed_engine.h) waits for every product from its own monitor
  // thread while the host thread submits and waits too: all bookkeeping below is guarded.
  std::mutex mu_;
  size_t stored_bytes_ = 0;
  bool recording_ = false;
  bool diverged_ = false;
  size_t next_call_ = 0;  // index of the next call in this pass
  std::vector<Call> calls_;
  // This pass's products: our ticket t is tickets_[t - ticket_base_ - 1]. Tickets keep growing
  // across passes (callers may compare them); the list itself is per pass.
  std::vector<Pending> tickets_;
  EngineTicket ticket_base_ = 0;
  size_t flushed_ = 0;  // tickets_[0, flushed_) are done and recorded
  int64_t replayed_ = 0, computed_ = 0;
};

}  // namespace nl
