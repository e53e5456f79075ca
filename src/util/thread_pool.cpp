#include "nightlora/util/thread_pool.h"

#include <algorithm>
#include <exception>

namespace nl {

ThreadPool::ThreadPool(int n_threads) {
  if (n_threads <= 0) n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i < n_threads; ++i) workers_.emplace_back([this, i] { worker_main(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

// Takes tasks until none are left. Tasks are claimed under the lock: they are coarse
// (whole row ranges), so the lock is never the bottleneck, and it keeps the code obvious.
void ThreadPool::drain(int worker) {
  std::unique_lock<std::mutex> lk(mu_);
  while (task_.call && next_ < n_tasks_) {
    int64_t i = next_++;
    const TaskRef task = task_;
    lk.unlock();
    task(i, worker);
    lk.lock();
    if (++finished_ == n_tasks_) done_.notify_all();
  }
}

void ThreadPool::worker_main(int worker) {
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lk(mu_);
      wake_.wait(lk, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
    }
    drain(worker);
  }
}

void ThreadPool::run_tasks(int64_t n_tasks, TaskRef task) {
  if (n_tasks <= 0) return;
  if (workers_.empty() || n_tasks == 1) {
    for (int64_t i = 0; i < n_tasks; ++i) task(i, 0);
    return;
  }
  {
    std::lock_guard<std::mutex> lk(mu_);
    task_ = task;
    n_tasks_ = n_tasks;
    next_ = 0;
    finished_ = 0;
    ++generation_;
  }
  wake_.notify_all();
  drain(0);
  std::unique_lock<std::mutex> lk(mu_);
  done_.wait(lk, [&] { return finished_ == n_tasks_; });
  task_ = TaskRef{};
}

}  // namespace nl
