// A fixed pool of worker threads for parallelising one operation at a time.
//
// Built once per model run. Each `run` wakes the workers, runs the work on every thread
// (the calling thread is thread 0) and returns when all are done. Workers spin briefly
// between operations, so the many small dispatches of one forward pass cost about a cache
// line round-trip each, then sleep on a futex so an idle server burns no CPU.
// No allocation per dispatch: the work is passed as a pointer to the caller's callable.
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>
#include <type_traits>
#include <vector>

namespace rapide {

class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Calls fn(thread_index) once on each of size() threads and waits for all of them.
  // Not reentrant: fn must not call run() on the same pool.
  template <typename F>
  void run(F&& fn) {
    using Fn = std::remove_reference_t<F>;
    dispatch([](void* ctx, int thread) { (*static_cast<Fn*>(ctx))(thread); },
             const_cast<void*>(static_cast<const void*>(&fn)));
  }

  // Splits [0, n) into size() contiguous ranges whose boundaries are multiples of `grain`
  // and calls fn(begin, end, thread) for each non-empty range.
  template <typename F>
  void parallel_for(int64_t n, int64_t grain, F&& fn) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    const int64_t units = (n + grain - 1) / grain;
    const int threads = units < n_threads_ ? static_cast<int>(units) : n_threads_;
    if (threads <= 1) {
      fn(int64_t{0}, n, 0);
      return;
    }
    run([&](int thread) {
      if (thread >= threads) return;
      const int64_t begin = units * thread / threads * grain;
      int64_t end = units * (thread + 1) / threads * grain;
      if (end > n) end = n;
      if (begin < end) fn(begin, end, thread);
    });
  }

 private:
  using Call = void (*)(void* ctx, int thread);
  void dispatch(Call call, void* ctx);
  void worker_loop(int thread);

  int n_threads_;
  std::vector<std::thread> workers_;
  Call call_ = nullptr;
  void* ctx_ = nullptr;
  // Bumped once per dispatch; workers compare it against the last generation they ran.
  alignas(64) std::atomic<uint32_t> generation_{0};
  alignas(64) std::atomic<int> pending_{0};
  std::atomic<bool> stopping_{false};
};

}  // namespace rapide
