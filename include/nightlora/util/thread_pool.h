// A small fixed pool of worker threads for data-parallel loops ("run task i for i < n").
// Every task writes its own disjoint outputs, so results never depend on which thread ran
// which task or on the number of threads: inference is bit-identical for any --threads.
// Tasks must not throw (validate inputs before the loop): an exception escaping a worker
// thread ends the process.
#pragma once
#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <type_traits>
#include <thread>
#include <vector>

namespace nl {

class ThreadPool {
 public:
  // n_threads <= 0: one per hardware thread. The calling thread works too, so a pool of
  // n threads starts n - 1 helpers.
  explicit ThreadPool(int n_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Runs task(i) for every i in [0, n_tasks) and returns when all are done. Tasks are
  // handed out one at a time, so uneven tasks balance. One loop at a time per pool.
  // The task is called through a non-owning reference (no std::function is made), so a
  // loop allocates nothing: the training step's "no allocation per step" rule relies on it.
  // A task may also take the index of the thread running it, task(i, worker) with worker
  // in [0, size()) (0: the thread that called parallel_for): no two tasks running at once
  // share a worker index, so per-worker scratch sized before the loop needs no lock and
  // never grows inside it.
  template <class F>
  void parallel_for(int64_t n_tasks, F&& task) {
    using Fn = std::remove_reference_t<F>;
    run_tasks(n_tasks, TaskRef{const_cast<void*>(static_cast<const void*>(&task)), [](void* f, int64_t i, int worker) {
                                 if constexpr (std::is_invocable_v<Fn&, int64_t, int>) (*static_cast<Fn*>(f))(i, worker);
                                 else (*static_cast<Fn*>(f))(i);
                               }});
  }

  // Splits [0, n) into about `size() * 4` contiguous ranges and runs body(begin, end) on
  // each: the usual way to spread rows of a matrix over the threads.
  template <class F>
  void parallel_ranges(int64_t n, F&& body) {
    if (n <= 0) return;
    const int64_t chunks = std::min<int64_t>(n, static_cast<int64_t>(size()) * 4);
    const int64_t per = (n + chunks - 1) / chunks;
    parallel_for((n + per - 1) / per, [&](int64_t c) { body(c * per, std::min(n, (c + 1) * per)); });
  }

 private:
  // A callable seen through a pointer: valid while the parallel_for that made it runs.
  struct TaskRef {
    void* obj = nullptr;
    void (*call)(void*, int64_t, int) = nullptr;
    void operator()(int64_t i, int worker) const { call(obj, i, worker); }
  };
  void run_tasks(int64_t n_tasks, TaskRef task);
  void worker_main(int worker);
  void drain(int worker);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable wake_, done_;
  TaskRef task_;
  int64_t n_tasks_ = 0;
  int64_t next_ = 0;        // next task index to hand out (under mu_)
  int64_t finished_ = 0;    // tasks completed in the current loop (under mu_)
  uint64_t generation_ = 0; // bumped per loop so sleeping workers notice new work
  bool stop_ = false;
};

}  // namespace nl
