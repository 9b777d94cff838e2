#include "base/thread_pool.h"

#include <immintrin.h>

namespace rapide {

namespace {
// About a millisecond of spinning before a worker sleeps: longer than the gap between the
// operations of one forward pass, short enough that an idle process goes quiet at once.
constexpr int kSpinIterations = 20000;
}  // namespace

ThreadPool::ThreadPool(int n_threads)
    : n_threads_(n_threads < 1 ? 1 : n_threads),
      ranges_(static_cast<size_t>(n_threads_)),
      idle_prefetch_(static_cast<size_t>(n_threads_)) {
  workers_.reserve(n_threads_ - 1);
  for (int t = 1; t < n_threads_; ++t) workers_.emplace_back([this, t] { worker_loop(t); });
}

ThreadPool::~ThreadPool() {
  stopping_.store(true, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::prefetch_while_idle(int thread, const void* base, size_t bytes) {
  if (n_threads_ == 1 || thread < 0 || thread >= n_threads_) return;
  IdleSlot& slot = idle_prefetch_[static_cast<size_t>(thread)];
  slot.base.store(static_cast<const uint8_t*>(base), std::memory_order_relaxed);
  slot.bytes.store(bytes, std::memory_order_relaxed);
}

ThreadPool::IdlePrefetch ThreadPool::take_idle_prefetch(int thread) {
  IdleSlot& slot = idle_prefetch_[static_cast<size_t>(thread)];
  IdlePrefetch pf;
  pf.bytes = slot.bytes.exchange(0, std::memory_order_relaxed);
  pf.base = slot.base.exchange(nullptr, std::memory_order_relaxed);
  if (pf.base == nullptr) pf.bytes = 0;
  return pf;
}

bool ThreadPool::prefetch_some(IdlePrefetch& pf) {
  // A few lines between two looks at the generation: a call that arrives waits at most for
  // these to be issued.
  constexpr size_t kLinesPerLook = 4;
  if (pf.bytes == 0) return false;
  const size_t bytes = pf.bytes < kLinesPerLook * 64 ? pf.bytes : kLinesPerLook * 64;
  for (size_t off = 0; off < bytes; off += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(pf.base + off), _MM_HINT_T0);
  }
  pf.base += bytes;
  pf.bytes -= bytes;
  return true;
}

namespace {
constexpr uint64_t kClosed = uint64_t{1} << 31;
constexpr uint64_t kJoinedOne = uint64_t{1} << 16;
constexpr uint64_t kActiveMask = kJoinedOne - 1;
constexpr uint64_t kJoinedMask = (kClosed - 1) & ~kActiveMask;
}  // namespace

void ThreadPool::dispatch(Call call, void* ctx, bool all_threads) {
  if (n_threads_ == 1) {
    call(ctx, 0);
    return;
  }
  call_ = call;
  ctx_ = ctx;
  const uint32_t generation = generation_.load(std::memory_order_relaxed) + 1;
  // Open the join window before announcing the generation (release: call_/ctx_ visible to
  // whoever joins).
  join_state_.store(static_cast<uint64_t>(generation) << 32, std::memory_order_release);
  generation_.store(generation, std::memory_order_release);
  generation_.notify_all();
  // What the caller prefetches once its part is done: taken now, so a slot set for the next
  // call inside this one is not lost.
  IdlePrefetch pf = take_idle_prefetch(0);
  call(ctx, 0);
  const uint64_t all_joined = static_cast<uint64_t>(n_threads_ - 1) * kJoinedOne;
  if (all_threads) {
    for (;;) {
      const uint64_t s = join_state_.load(std::memory_order_acquire);
      if ((s & kJoinedMask) == all_joined && (s & kActiveMask) == 0) break;
      if (!prefetch_some(pf)) _mm_pause();
    }
    return;
  }
  // Close the window, then wait only for the workers already inside the call.
  uint64_t s = join_state_.fetch_or(kClosed, std::memory_order_acq_rel) | kClosed;
  while ((s & kActiveMask) != 0) {
    if (!prefetch_some(pf)) _mm_pause();
    s = join_state_.load(std::memory_order_acquire);
  }
}

ThreadPool::Claim ThreadPool::claim_pieces(int owner, bool own) {
  std::atomic<uint64_t>& word = ranges_[static_cast<size_t>(owner)].pieces;
  uint64_t w = word.load(std::memory_order_relaxed);
  for (;;) {
    const int64_t f = static_cast<int64_t>(w >> 32), b = static_cast<int64_t>(w & 0xffffffffu);
    if (f >= b) return {};
    if (!own) {
      if (word.compare_exchange_weak(w, pack_range(f, b - 1), std::memory_order_relaxed)) {
        return {b - 1, b};
      }
      continue;
    }
    const int64_t take = std::max<int64_t>(1, (b - f) / kOwnClaimDivisor);
    if (word.compare_exchange_weak(w, pack_range(f + take, b), std::memory_order_relaxed)) {
      return {f, f + take};
    }
  }
}

bool ThreadPool::try_join(uint32_t generation) {
  uint64_t s = join_state_.load(std::memory_order_acquire);
  for (;;) {
    if ((s >> 32) != generation || (s & kClosed) != 0) return false;
    if (join_state_.compare_exchange_weak(s, s + kJoinedOne + 1, std::memory_order_acq_rel,
                                          std::memory_order_acquire)) {
      return true;
    }
  }
}

void ThreadPool::worker_loop(int thread) {
  // Not generation_.load(): the constructor may return and the first dispatch bump the
  // generation before this thread starts, and the worker would then skip that dispatch
  // while the caller waits for it forever. No dispatch precedes construction: start at 0.
  uint32_t seen = 0;
  IdlePrefetch pf;  // taken from the slot when a call starts, issued after it
  for (;;) {
    uint32_t current = generation_.load(std::memory_order_acquire);
    for (int i = 0; i < kSpinIterations && current == seen; ++i) {
      if (!prefetch_some(pf)) _mm_pause();
      current = generation_.load(std::memory_order_acquire);
    }
    if (current == seen) {
      generation_.wait(seen, std::memory_order_acquire);
      continue;
    }
    seen = current;
    if (stopping_.load(std::memory_order_acquire)) return;
    // The slot as the caller set it before this call (acquire above); a late worker drops it.
    pf = take_idle_prefetch(thread);
    if (!try_join(current)) continue;  // too late: the caller finished without us
    call_(ctx_, thread);
    join_state_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

}  // namespace rapide
