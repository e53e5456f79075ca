#include "nightlora/engine/engine_turns.h"

namespace nl {

EngineTurns::Turn& EngineTurns::Turn::operator=(Turn&& o) noexcept {
  if (this != &o) {
    release();
    owner_ = o.owner_;
    o.owner_ = nullptr;
  }
  return *this;
}

void EngineTurns::Turn::release() {
  if (owner_) owner_->give_back();
  owner_ = nullptr;
}

EngineTurns::Turn EngineTurns::serve() {
  std::unique_lock<std::mutex> lock(mu_);
  ++serve_waiting_;
  cv_.wait(lock, [&] { return !busy_; });
  --serve_waiting_;
  busy_ = true;
  return Turn(this);
}

EngineTurns::Turn EngineTurns::train() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return !busy_ && serve_waiting_ == 0; });
  busy_ = true;
  return Turn(this);
}

int EngineTurns::serving_waiting() const {
  std::lock_guard<std::mutex> lock(mu_);
  return serve_waiting_;
}

void EngineTurns::give_back() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    busy_ = false;
  }
  cv_.notify_all();
}

}  // namespace nl
