#include "replay_engine.h"

#include <cstring>

#include "nightlora/util/error.h"

namespace nl {

namespace {

// 64-bit hash of a float buffer's bits (a guard, not a security measure): 8 bytes at a time,
// each word mixed by a multiply-xorshift round so nearby differences spread.
uint64_t hash_floats(const float* p, int64_t n) {
  const auto* b = reinterpret_cast<const unsigned char*>(p);
  const size_t bytes = static_cast<size_t>(n) * sizeof(float);
  uint64_t h = 0x9e3779b97f4a7c15ull ^ bytes;
  size_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    uint64_t w;
    std::memcpy(&w, b + i, 8);
    h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
    h ^= h >> 31;
  }
  for (; i < bytes; ++i) h = (h ^ b[i]) * 0x94d049bb133111ebull;
  return h ^ (h >> 29);
}

}  // namespace

void ReplayEngine::start_recording() {
  wait(all_submitted());
  std::lock_guard<std::mutex> lk(mu_);
  calls_.clear();
  stored_bytes_ = 0;
  recording_ = true;
  diverged_ = false;
  next_call_ = 0;
  ticket_base_ += tickets_.size();
  tickets_.clear();
  flushed_ = 0;
}

void ReplayEngine::start_replay() {
  wait(all_submitted());
  std::lock_guard<std::mutex> lk(mu_);
  recording_ = false;
  diverged_ = false;
  next_call_ = 0;
  ticket_base_ += tickets_.size();
  tickets_.clear();
  flushed_ = 0;
}

EngineTicket ReplayEngine::submit(WeightHandle h, bool input_grad, const float* in, int64_t n_in, int64_t T,
                                  float* out, int64_t n_out, Precision p) {
  std::lock_guard<std::mutex> lk(mu_);
  const size_t idx = next_call_++;
  const uint64_t hin = hash_floats(in, n_in);
  Pending pend;
  if (!recording_ && !diverged_) {
    const Call* c = idx < calls_.size() ? &calls_[idx] : nullptr;
    const bool same = c && c->h == h && c->input_grad == input_grad && c->T == T && c->mode == p && c->input_hash == hin;
    if (!same) diverged_ = true;
    if (same && c->stored) {
      std::memcpy(out, c->out.data(), c->out.size() * sizeof(float));
      ++replayed_;
      tickets_.push_back(pend);
      return ticket_base_ + tickets_.size();
    }
  }
  pend.on_inner = true;
  pend.inner = input_grad ? inner_.submit_input_grad(h, in, T, out, p) : inner_.submit_forward(h, in, T, out, p);
  ++computed_;
  if (recording_) {
    Call c;
    c.h = h;
    c.input_grad = input_grad;
    c.T = T;
    c.mode = p;
    c.input_hash = hin;
    const size_t bytes = static_cast<size_t>(n_out) * sizeof(float);
    if (stored_bytes_ + bytes <= cap_bytes_) {
      stored_bytes_ += bytes;
      pend.record = static_cast<int64_t>(calls_.size());
      pend.out = out;
      pend.n = static_cast<size_t>(n_out);
    }
    calls_.push_back(std::move(c));
  }
  tickets_.push_back(pend);
  return ticket_base_ + tickets_.size();
}

EngineTicket ReplayEngine::submit_forward(WeightHandle h, const float* X, int64_t T, float* Y, Precision p) {
  return submit(h, false, X, T * cols(h), T, Y, T * rows(h), p);
}

EngineTicket ReplayEngine::submit_input_grad(WeightHandle h, const float* dY, int64_t T, float* dX, Precision p) {
  return submit(h, true, dY, T * rows(h), T, dX, T * cols(h), p);
}

EngineTicket ReplayEngine::all_submitted() {
  std::lock_guard<std::mutex> lk(mu_);
  return ticket_base_ + tickets_.size();
}

void ReplayEngine::wait(EngineTicket t) {
  std::unique_lock<std::mutex> lk(mu_);
  if (t <= ticket_base_) return;  // a ticket of an earlier pass: all done
  size_t upto = std::min(static_cast<size_t>(t - ticket_base_), tickets_.size());
  // Tickets are in submission order and the inner engine's wait covers every earlier ticket,
  // so waiting for the last inner ticket up to `upto` finishes them all. The lock is not held
  // while the inner engine works, so the other thread can submit or wait meanwhile.
  for (size_t i = upto; i-- > flushed_;)
    if (tickets_[i].on_inner) {
      const EngineTicket inner = tickets_[i].inner;
      lk.unlock();
      inner_.wait(inner);
      lk.lock();
      break;
    }
  if (t <= ticket_base_) return;  // a new pass began meanwhile: this one is all done
  upto = std::min(static_cast<size_t>(t - ticket_base_), tickets_.size());
  // Record outputs before any waiter returns (the host may change an output buffer after).
  for (; flushed_ < upto; ++flushed_) {
    const Pending& pd = tickets_[flushed_];
    if (pd.record < 0) continue;
    Call& c = calls_[static_cast<size_t>(pd.record)];
    c.out.assign(pd.out, pd.out + pd.n);
    c.stored = true;
  }
}

}  // namespace nl
