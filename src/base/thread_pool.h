// A fixed pool of worker threads for parallelising one operation at a time.
//
// Built once per model run. Each `run` wakes the workers, runs the work on every thread
// (the calling thread is thread 0) and returns when all are done. Workers spin briefly
// between operations, so the many small dispatches of one forward pass cost about a cache
// line round-trip each, then sleep on a futex so an idle server burns no CPU.
// No allocation per dispatch: the work is passed as a pointer to the caller's callable.
#pragma once

#include <atomic>
#include <cstddef>
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

  // Names [base, base + bytes): what `thread` reads first in the call after the next one
  // dispatched (the start of its part of the next matrix a decode step streams). Once that
  // next call is done, the thread prefetches those bytes while it waits (a worker for the
  // following call, the caller for the workers), so the gaps between the products of a
  // forward pass move data instead of spinning. One-shot: each thread takes its slot as that
  // call starts (a later call finds it empty).
  void prefetch_while_idle(int thread, const void* base, size_t bytes);
  // parallel_ranges: the first of `pieces` that `thread` of `threads` owns (its range ends
  // where thread + 1's begins).
  static int64_t first_piece(int64_t pieces, int thread, int threads) {
    return pieces * thread / threads;
  }

  // Calls fn(thread_index) once on each of size() threads and waits for all of them.
  // Not reentrant: fn must not call run() on the same pool.
  template <typename F>
  void run(F&& fn) {
    using Fn = std::remove_reference_t<F>;
    dispatch([](void* ctx, int thread) { (*static_cast<Fn*>(ctx))(thread); },
             const_cast<void*>(static_cast<const void*>(&fn)), /*all_threads=*/true);
  }

  // Splits [0, n) into contiguous ranges whose boundaries are multiples of `grain` (a few
  // per thread) and calls fn(begin, end, thread) for each non-empty range; the threads
  // claim ranges as they arrive, so a worker the OS has not scheduled yet holds nobody up:
  // the others take its share and the call returns without it. `thread` is unique among
  // the calls running at one time (index per-thread scratch with it).
  template <typename F>
  void parallel_for(int64_t n, int64_t grain, F&& fn) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    const int64_t units = (n + grain - 1) / grain;
    if (units <= 1 || n_threads_ == 1) {
      fn(int64_t{0}, n, 0);
      return;
    }
    const int64_t per_thread_chunks = 4;
    const int64_t chunks =
        units < n_threads_ * per_thread_chunks ? units : n_threads_ * per_thread_chunks;
    std::atomic<int64_t> next{0};
    auto body = [&](int thread) {
      for (;;) {
        const int64_t c = next.fetch_add(1, std::memory_order_relaxed);
        if (c >= chunks) return;
        const int64_t begin = units * c / chunks * grain;
        int64_t end = units * (c + 1) / chunks * grain;
        if (end > n) end = n;
        if (begin < end) fn(begin, end, thread);
      }
    };
    using Body = decltype(body);
    dispatch([](void* ctx, int thread) { (*static_cast<Body*>(ctx))(thread); }, &body,
             /*all_threads=*/false);
  }

  // Like parallel_for, but [0, n) is first split into one contiguous range per thread, cut into
  // pieces of `grain`: each thread walks its own range front to back (claiming a quarter of what is
  // left of it at a time), then takes pieces one by one from the back of the others' ranges until
  // none is left. fn still gets one piece per call. Decode streams weights: a thread's memory
  // stream stays one ascending run across its pieces (a hardware prefetch stream that is not
  // restarted), a thread that finishes early still helps the slower one, and one the OS has not
  // scheduled yet has its whole range taken over. The same thread owns the same range of every call
  // with the same n (per-core caches keep their part).
  template <typename F>
  void parallel_ranges(int64_t n, int64_t grain, F&& fn) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    const int64_t pieces = (n + grain - 1) / grain;
    if (pieces <= 1 || n_threads_ == 1 || pieces >= (int64_t{1} << 31)) {
      fn(int64_t{0}, n, 0);
      return;
    }
    for (int t = 0; t < n_threads_; ++t) {
      ranges_[static_cast<size_t>(t)].pieces.store(
          pack_range(first_piece(pieces, t, n_threads_), first_piece(pieces, t + 1, n_threads_)),
          std::memory_order_relaxed);
    }
    auto body = [&](int thread) {
      auto run = [&](int64_t piece) {
        const int64_t begin = piece * grain;
        fn(begin, begin + grain < n ? begin + grain : n, thread);
      };
      for (Claim c; !(c = claim_pieces(thread, /*own=*/true)).empty();) {
        for (int64_t p = c.begin; p < c.end; ++p) run(p);
      }
      for (int k = 1; k < n_threads_; ++k) {
        const int victim = (thread + k) % n_threads_;
        for (Claim c; !(c = claim_pieces(victim, /*own=*/false)).empty();) run(c.begin);
      }
    };
    using Body = decltype(body);
    dispatch([](void* ctx, int thread) { (*static_cast<Body*>(ctx))(thread); }, &body,
             /*all_threads=*/false);
  }

 private:
  using Call = void (*)(void* ctx, int thread);
  // parallel_ranges: a thread's unclaimed pieces [front, back) in one word, so the owner
  // (from the front) and a thief (from the back) never both take the last one.
  static uint64_t pack_range(int64_t front, int64_t back) {
    return (static_cast<uint64_t>(front) << 32) | static_cast<uint64_t>(back);
  }
  // parallel_ranges: pieces [begin, end) taken from `owner`'s range; empty once none is left. The
  // owner (own) takes a quarter of what is left of its range at once (at least one piece), from the
  // front; a thief takes one piece from the back. Each claim is a locked read-modify-write, a full
  // barrier on x86 that also waits for the core's pending stores (the previous piece's results):
  // one per piece cost 1-3 % of a 32-row decode step (synth100m Q8_0, per-step minima alternated in
  // one process: 9.49 -> 9.23, 9.71 -> 9.61, 10.77 -> 10.57 ms with the q8_0 KV cache, 11.18 ->
  // 11.03, 11.14 -> 11.00, 11.31 -> 11.22 with f16; `perf annotate` had 77 % of claim_piece's
  // samples, 2.6 % of the step, on the CAS). A thread preempted in its batch holds at most a
  // quarter of its range from the thief, and a quarter of what is left shrinks to single pieces by
  // the end, where the two threads' finishes meet.
  struct Claim {
    int64_t begin = 0, end = 0;
    bool empty() const { return begin >= end; }
  };
  static constexpr int64_t kOwnClaimDivisor = 4;
  Claim claim_pieces(int owner, bool own);
  struct alignas(64) Range {
    std::atomic<uint64_t> pieces{0};
  };
  // prefetch_while_idle's bytes for one thread, written by the caller between dispatches.
  // Atomic because a worker that missed a call may take its slot while the caller writes the
  // next one; the two halves may then tear, which costs a useless prefetch, never a fault.
  struct alignas(64) IdleSlot {
    std::atomic<const uint8_t*> base{nullptr};
    std::atomic<size_t> bytes{0};
  };
  struct IdlePrefetch {
    const uint8_t* base = nullptr;
    size_t bytes = 0;
  };
  IdlePrefetch take_idle_prefetch(int thread);
  // Issues the next few lines of `pf` (advancing it); false once none is left.
  static bool prefetch_some(IdlePrefetch& pf);
  // all_threads: wait until every worker has run the call (run()); otherwise the workers
  // that join before the caller finishes its own part run it, and late ones skip it.
  void dispatch(Call call, void* ctx, bool all_threads);
  bool try_join(uint32_t generation);
  void worker_loop(int thread);

  int n_threads_;
  std::vector<Range> ranges_;            // one per thread (after n_threads_: it sizes them)
  std::vector<IdleSlot> idle_prefetch_;  // one per thread (likewise)
  std::vector<std::thread> workers_;
  Call call_ = nullptr;
  void* ctx_ = nullptr;
  // Bumped once per dispatch; workers compare it against the last generation they ran.
  alignas(64) std::atomic<uint32_t> generation_{0};
  // Who runs the current call: generation (high 32 bits), kClosed once the caller stops
  // admitting workers, the count of workers that joined (bits 16..30) and of those still
  // running it (low 16 bits). Joining is a CAS on this word, so a worker can never run a
  // call whose caller has already returned.
  alignas(64) std::atomic<uint64_t> join_state_{0};
  std::atomic<bool> stopping_{false};
};

}  // namespace rapide
