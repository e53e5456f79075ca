// The thread pool's worker index: what the cpu engine's per-thread panels rely on to be
// sized once and never shared (every task runs once; a worker index is in [0, size()) and is
// never held by two tasks running at the same time).
#include "nightlora/util/thread_pool.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace {

TEST(ThreadPool, WorkerIndexIsInRangeAndNeverShared) {
  for (int threads : {1, 2, 4}) {
    SCOPED_TRACE("threads " + std::to_string(threads));
    nl::ThreadPool pool(threads);
    ASSERT_EQ(pool.size(), threads);
    const int64_t n = 2000;
    std::vector<std::atomic<int>> runs(n);
    std::unique_ptr<std::atomic<bool>[]> busy(new std::atomic<bool>[static_cast<size_t>(threads)]);
    for (int w = 0; w < threads; ++w) busy[w] = false;
    std::atomic<int> bad_index{0}, shared{0};
    for (int loop = 0; loop < 3; ++loop) {
      pool.parallel_for(n, [&](int64_t i, int worker) {
        if (worker < 0 || worker >= threads) {
          ++bad_index;
          return;
        }
        if (busy[worker].exchange(true)) ++shared;  // another running task holds this index
        volatile double x = 0;
        for (int k = 0; k < 200; ++k) x = x + k;  // a little work, so tasks overlap
        ++runs[static_cast<size_t>(i)];
        busy[worker] = false;
      });
    }
    EXPECT_EQ(bad_index.load(), 0);
    EXPECT_EQ(shared.load(), 0);
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(runs[static_cast<size_t>(i)].load(), 3) << "task " << i;
  }
}

TEST(ThreadPool, TasksWithoutTheIndexStillRunEachOnce) {
  nl::ThreadPool pool(3);
  std::vector<std::atomic<int>> runs(100);
  pool.parallel_for(100, [&](int64_t i) { ++runs[static_cast<size_t>(i)]; });
  for (const auto& r : runs) EXPECT_EQ(r.load(), 1);
  std::vector<std::atomic<int>> seen(1000);
  pool.parallel_ranges(1000, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) ++seen[static_cast<size_t>(i)];
  });
  for (const auto& r : seen) EXPECT_EQ(r.load(), 1);
}

// Loops that follow at once (the workers may still be finishing the last one), after a
// pause (workers asleep on the condition variable) and of 1 to 9 tasks (fewer tasks than
// threads, or one task, run on the caller alone) each run every task exactly once.
TEST(ThreadPool, BackToBackAndAfterSleepingEveryLoopRunsEachTaskOnce) {
  nl::ThreadPool pool(4);
  for (int loop = 0; loop < 200; ++loop) {
    if (loop % 50 == 49) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    const int64_t n = 1 + loop % 9;
    std::vector<std::atomic<int>> runs(static_cast<size_t>(n));
    pool.parallel_for(n, [&](int64_t i) { ++runs[static_cast<size_t>(i)]; });
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(runs[static_cast<size_t>(i)].load(), 1) << "loop " << loop << " task " << i;
  }
}

}  // namespace
