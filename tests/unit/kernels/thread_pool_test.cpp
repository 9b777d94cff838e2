// The pool the kernels split work with: every index covered exactly once, every thread run
// once by run(), and many back-to-back dispatches (where late workers must skip a call
// safely) with more threads than cores; idle-prefetch hints change none of it.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
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

// parallel_ranges: every index once, pieces aligned to the grain; a thread's own pieces come
// in ascending order; and a thread that stalls in its first piece has the rest of its range
// taken over by the others (the call still covers everything and returns).
TEST(ThreadPool, ParallelRangesCoversEachIndexOnceAndSteals) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    for (int64_t n : {1, 2, 7, 64, 1000}) {
      for (int64_t grain : {1, 3, 16}) {
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        std::vector<int64_t> last_own(static_cast<size_t>(threads), -1);
        pool.parallel_ranges(n, grain, [&](int64_t b, int64_t e, int thread) {
          ASSERT_GE(thread, 0);
          ASSERT_LT(thread, threads);
          ASSERT_TRUE(b % grain == 0);
          const int64_t pieces = (n + grain - 1) / grain, piece = b / grain;
          if (threads == 1 || pieces == 1) {  // one call, as parallel_for makes
            ASSERT_TRUE(b == 0 && e == n);
          } else {
            ASSERT_LE(e - b, grain);
          }
          const bool own =
              piece >= pieces * thread / threads && piece < pieces * (thread + 1) / threads;
          if (own) {  // front to back within the owner's range
            ASSERT_GT(piece, last_own[static_cast<size_t>(thread)]);
            last_own[static_cast<size_t>(thread)] = piece;
          }
          for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
        });
        for (auto& h : hits) ASSERT_EQ(h.load(), 1) << threads << " " << n << " " << grain;
      }
    }
  }
  ThreadPool pool(3);
  std::vector<std::atomic<int>> hits(300);
  std::atomic<int> by_staller{0};
  pool.parallel_ranges(300, 10, [&](int64_t b, int64_t e, int thread) {
    if (thread == 1) {
      ++by_staller;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
  });
  for (auto& h : hits) ASSERT_EQ(h.load(), 1);
  // Its range (10 pieces) went mostly to the others: it holds only its first claim, a
  // quarter of the range (2 pieces), while it sleeps.
  EXPECT_LE(by_staller.load(), 2);
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

// prefetch_while_idle is a hint: whatever it names (a buffer, nothing, a thread the pool
// lacks, a slot still pending when the pool goes away), every call still covers its work.
TEST(ThreadPool, IdlePrefetchHintsChangeNoResult) {
  std::vector<uint8_t> buffer(1 << 20, 1);
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    std::atomic<int64_t> total{0};
    for (int rep = 0; rep < 600; ++rep) {
      for (int t = -1; t <= threads; ++t) {
        const size_t offset = static_cast<size_t>(rep % 16) * 4096;
        pool.prefetch_while_idle(t, buffer.data() + offset, rep % 3 == 0 ? 0 : 64 * 1024);
      }
      if (rep % 2 == 0) {
        pool.parallel_ranges(64, 4, [&](int64_t b, int64_t e, int) { total += e - b; });
      } else {
        pool.run([&](int) { total += 1; });
      }
    }
    EXPECT_EQ(total.load(), 300 * 64 + 300 * threads);
    pool.prefetch_while_idle(threads - 1, buffer.data(), buffer.size());  // left pending
  }
}

}  // namespace
}  // namespace rapide
