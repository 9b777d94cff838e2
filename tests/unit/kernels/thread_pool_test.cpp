// The pool the kernels split work with: every index covered exactly once, every thread run
// once by run(), and many back-to-back dispatches (where late workers must skip a call
// safely) with more threads than cores.
#include <gtest/gtest.h>

#include <atomic>
#include <vector>

#include "base/thread_pool.h"

namespace rapide {
namespace {

TEST(ThreadPool, ParallelForCoversEachIndexOnce) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    for (int64_t n : {1, 2, 7, 64, 1000}) {
      for (int64_t grain : {1, 3, 16}) {
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        pool.parallel_for(n, grain, [&](int64_t b, int64_t e, int thread) {
          ASSERT_GE(thread, 0);
          ASSERT_LT(thread, threads);
          ASSERT_TRUE(b % grain == 0);
          for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
        });
        for (auto& h : hits) ASSERT_EQ(h.load(), 1) << threads << " " << n << " " << grain;
      }
    }
  }
}

TEST(ThreadPool, RunCallsEveryThreadOnce) {
  ThreadPool pool(4);
  for (int rep = 0; rep < 200; ++rep) {
    std::vector<std::atomic<int>> calls(4);
    pool.run([&](int thread) { calls[static_cast<size_t>(thread)]++; });
    for (auto& c : calls) ASSERT_EQ(c.load(), 1);
  }
}

TEST(ThreadPool, ManyDispatchesOversubscribed) {
  ThreadPool pool(6);
  std::atomic<int64_t> total{0};
  for (int rep = 0; rep < 20000; ++rep) {
    pool.parallel_for(12, 1, [&](int64_t b, int64_t e, int) { total += e - b; });
    if (rep % 100 == 0) pool.run([&](int) { total += 1; });
  }
  EXPECT_EQ(total.load(), 20000 * 12 + 200 * 6);
}

}  // namespace
}  // namespace rapide
