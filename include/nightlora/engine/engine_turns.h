// Turns on one frozen engine shared by inference and training (a server, an app through the
// C API): one user at a time, because a product's scratch and the order of its tickets belong
// to whoever submitted it. Serving goes first: a training job takes a turn per step, so a
// request waits at most for the step in flight, and a waiting request is served before the
// job's next step.
#pragma once
#include <condition_variable>
#include <mutex>

namespace nl {

class EngineTurns {
 public:
  // The engine is the holder's until the turn is destroyed (or released).
  class Turn {
   public:
    Turn() = default;
    Turn(Turn&& o) noexcept : owner_(o.owner_) { o.owner_ = nullptr; }
    Turn& operator=(Turn&& o) noexcept;
    Turn(const Turn&) = delete;
    Turn& operator=(const Turn&) = delete;
    ~Turn() { release(); }
    void release();
    bool held() const { return owner_ != nullptr; }

   private:
    friend class EngineTurns;
    explicit Turn(EngineTurns* owner) : owner_(owner) {}
    EngineTurns* owner_ = nullptr;
  };

  // Blocks until the engine is free; goes before any waiting train().
  Turn serve();
  // Blocks until the engine is free and no serve() is waiting.
  Turn train();
  // serve() calls waiting now (for a job that wants to know whether to yield).
  int serving_waiting() const;

 private:
  void give_back();
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool busy_ = false;
  int serve_waiting_ = 0;
};

}  // namespace nl
