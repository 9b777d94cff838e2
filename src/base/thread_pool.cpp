#include "base/thread_pool.h"

#include <immintrin.h>

namespace rapide {

namespace {
// About a millisecond of spinning before a worker sleeps: longer than the gap between the
// operations of one forward pass, short enough that an idle process goes quiet at once.
constexpr int kSpinIterations = 20000;
}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads < 1 ? 1 : n_threads) {
  workers_.reserve(n_threads_ - 1);
  for (int t = 1; t < n_threads_; ++t) workers_.emplace_back([this, t] { worker_loop(t); });
}

ThreadPool::~ThreadPool() {
  stopping_.store(true, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::dispatch(Call call, void* ctx) {
  if (n_threads_ == 1) {
    call(ctx, 0);
    return;
  }
  call_ = call;
  ctx_ = ctx;
  pending_.store(n_threads_ - 1, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
  call(ctx, 0);
  while (pending_.load(std::memory_order_acquire) != 0) _mm_pause();
}

void ThreadPool::worker_loop(int thread) {
  // Not generation_.load(): the constructor may return and the first dispatch bump the
  // generation before this thread starts, and the worker would then skip that dispatch
  // while the caller waits for it forever. No dispatch precedes construction: start at 0.
  uint32_t seen = 0;
  for (;;) {
    uint32_t current = generation_.load(std::memory_order_acquire);
    for (int i = 0; i < kSpinIterations && current == seen; ++i) {
      _mm_pause();
      current = generation_.load(std::memory_order_acquire);
    }
    if (current == seen) {
      generation_.wait(seen, std::memory_order_acquire);
      continue;
    }
    seen = current;
    if (stopping_.load(std::memory_order_acquire)) return;
    call_(ctx_, thread);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

}  // namespace rapide
