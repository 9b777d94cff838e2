// PagedKvStore: the engine's KvStore. Per-sequence block tables over one BlockPool
// (after vLLM v1's kv_cache_manager.py).
//
// A sequence is named by an integer slot id the engine assigns; it exists from its first
// reserve()/append_blocks() until release(). Its `positions` are the token positions
// [0, positions) it holds: already computed, or about to be written by the next forward
// pass. The contract with the model: before forward(), reserve(seq, last position + 1) for
// every sequence in the batch; attention then finds every position through block_table().
//
// Scheduling without surprises: blocks_needed() says what a reserve would take and
// free_blocks() what is left, so a scheduler sums blocks_needed over the sequences it wants
// to run and admits / preempts before committing anything. try_reserve() is all-or-nothing.
//
// Sharing (prefix cache, forks): blocks are reference-counted in the pool. append_blocks()
// puts already-filled blocks at the end of a table with a new reference; a block is only
// written by a sequence that owns it alone: reserve() copies a shared block before the
// sequence writes into it (copy-on-write) and drops the content hash of an unshared one.
//
// Sliding windows: when every layer attends through a window (set_sliding_window), the
// blocks before what a sequence's next query can see are freed (free_outside_window) and
// their table entries become kFreedBlock; a sequence then holds about window + one step of
// positions however long it grows, and admission counts that bound instead of its length.
//
// Not thread-safe: one engine thread owns the store (see ARCHITECTURE.md). block_table()
// spans stay valid until the next call that changes that sequence.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "kv/block_pool.h"
#include "kv/kv_layout_mode.h"
#include "kv/kv_store.h"
#include "model/kv_ops.h"

namespace rapide {

// A snapshot for stats, the advisor and the --kv-layout comparison.
struct KvUsage {
  int32_t sequences = 0;
  int32_t total_blocks = 0;
  int32_t used_blocks = 0;
  int32_t free_blocks = 0;         // including evictable cached blocks
  int32_t cached_free_blocks = 0;  // free, but still holding reusable content
  int64_t reserved_positions = 0;  // slots in the sequences' blocks (shared blocks counted
                                   // once per sequence)
  int64_t used_positions = 0;      // positions the sequences hold (not those in blocks
                                   // freed outside the sliding window)
  uint64_t wasted_bytes = 0;       // (reserved - used) positions, in bytes
};

class PagedKvStore final : public KvStore {
 public:
  // n_blocks blocks of `layout`; no sequence may exceed max_context positions, and in
  // contiguous mode each sequence reserves all of them at admission.
  PagedKvStore(const KvLayout& layout, int32_t n_blocks, int max_context,
               KvLayoutMode mode = KvLayoutMode::kPaged);
  // As many blocks as `budget_bytes` holds (see parse_memory_budget).
  static std::unique_ptr<PagedKvStore> with_budget(const KvLayout& layout, uint64_t budget_bytes,
                                                   int max_context,
                                                   KvLayoutMode mode = KvLayoutMode::kPaged);

  // KvStore: what attention reads. An unknown sequence has an empty table.
  const KvLayout& layout() const override { return pool_.layout(); }
  std::span<const int32_t> block_table(int32_t seq_id) const override;
  uint8_t* block_data(int32_t block) override { return pool_.data(block); }

  KvLayoutMode mode() const { return mode_; }
  int max_context() const { return max_context_; }
  int block_size() const { return pool_.layout().block_size; }
  int32_t total_blocks() const { return pool_.total_blocks(); }
  int32_t free_blocks() const { return pool_.free_blocks(); }
  int32_t used_blocks() const { return pool_.used_blocks(); }
  BlockPool& pool() { return pool_; }
  const BlockPool& pool() const { return pool_; }

  // The most blocks a sequence of n_positions holds at once: ceil(n / block_size) paged (no
  // more than the sliding window's bound), the whole max-context reservation contiguous.
  int32_t blocks_for_new_sequence(int n_positions) const;

  // Every layer attends through `window` positions (0: none; ModelConfig::every_layer_window)
  // and no reserve adds more than `step_positions` positions to a sequence that already has
  // some (a prefill chunk plus guesses): together they bound the blocks a sequence holds.
  // Paged mode only; contiguous mode reserves the whole context anyway.
  void set_sliding_window(int window, int step_positions);
  // Frees the sequence's blocks that no query at `next_position` or later reads, marking
  // them kFreedBlock in its table, and returns how many it freed. A freed block that holds
  // cached content stays in the pool as an evictable cached block. The caller must never
  // truncate the sequence below next_position afterwards (truncate refuses).
  int32_t free_outside_window(int32_t seq_id, int next_position);
  // Extra blocks reserve(seq_id, n_positions) would allocate now (0 when already covered),
  // counting a copy-on-write of a shared tail block. An unknown sequence counts as new.
  int32_t blocks_needed(int32_t seq_id, int n_positions) const;
  // Whether reserve(seq_id, n_positions) would succeed now.
  bool can_reserve(int32_t seq_id, int n_positions) const;
  // Whether a sequence of n_positions could fit an otherwise empty cache: admission control
  // rejects the request when not, instead of queueing it forever.
  bool can_ever_fit(int n_positions) const;

  // Makes the sequence hold positions [0, n_positions), growing its table; never shrinks
  // (see truncate). try_reserve returns false and changes nothing when the free blocks do
  // not suffice now; reserve throws Error(kResourceExhausted) instead. Both throw
  // kOutOfRange past max_context and kResourceExhausted when even an empty pool could never
  // hold the sequence, so a request that can never fit is rejected rather than queued.
  bool try_reserve(int32_t seq_id, int n_positions);
  void reserve(int32_t seq_id, int n_positions);

  // Rolls the sequence back to its first n_positions (rejected speculative tokens,
  // preemption to a prefix). Paged mode frees whole blocks past the new end; contiguous
  // mode keeps its reservation. Throws kInvalidArgument when n_positions > positions() or
  // when the query at n_positions would read a block the sliding window freed.
  void truncate(int32_t seq_id, int n_positions);

  // Drops every block reference of the sequence at once (finished, aborted, preempted) and
  // forgets it. Releasing an unknown sequence does nothing.
  void release(int32_t seq_id);

  bool has_sequence(int32_t seq_id) const { return sequences_.count(seq_id) != 0; }
  int32_t sequence_count() const { return static_cast<int32_t>(sequences_.size()); }
  // Positions the sequence holds (0 for an unknown one).
  int positions(int32_t seq_id) const;
  // Slots reserved in the sequence's blocks that hold no position of it.
  int64_t wasted_positions(int32_t seq_id) const;
  uint64_t wasted_bytes(int32_t seq_id) const;
  KvUsage usage() const;

  // Block contents as bytes (layout().block_bytes() long, layout in kv/kv_store.h), for
  // the offload tier and prefill -> decode transfer. Any block may be exported, including an
  // evictable cached one from inside the pool's eviction listener.
  std::vector<uint8_t> export_block(int32_t block) const;
  void export_block(int32_t block, std::span<uint8_t> out) const;
  // A new block holding `bytes`, with one reference owned by the caller (drop it with
  // pool().free). Throws kInvalidArgument for a wrong size, kResourceExhausted when full.
  int32_t import_block(std::span<const uint8_t> bytes);

  // Appends filled blocks (cached prefix, imported, another sequence's) to the sequence's
  // table, taking a new reference on each; the caller keeps its own. The sequence must end
  // on a block boundary and n_positions must end inside the last appended block. Paged
  // mode only (kUnsupported otherwise).
  void append_blocks(int32_t seq_id, std::span<const int32_t> blocks, int n_positions);

  // Throws Error(kInternal) when a sequence is still live or the pool has a referenced
  // block (tests call it after every scenario).
  void check_no_leaks() const;

  // Recording (off by default): every move of block bytes the store makes (copy-on-write),
  // and those its prefix cache makes through note_op (partial copies, offloads, restores,
  // imports), is kept as a KV op (model/kv_ops.h) until take_ops(), in the order made. The
  // engine puts them in the step plan, so other memory (tensor-parallel followers, a
  // replay) can repeat them. Turning recording off drops what was pending.
  void record_ops(bool on);
  bool recording_ops() const { return recording_; }
  void note_op(KvOp op) {
    if (recording_) pending_ops_.push_back(std::move(op));
  }
  bool has_pending_ops() const { return !pending_ops_.empty(); }
  std::vector<KvOp> take_ops();

 private:
  struct Sequence {
    std::vector<int32_t> blocks;
    int positions = 0;
    int32_t freed = 0;  // leading blocks freed outside the sliding window (kFreedBlock)
  };

  static int32_t blocks_for(int n_positions, int block_size);
  void check_positions(int32_t seq_id, int n_positions) const;
  // Blocks of `seq` that the positions [seq.positions, n_positions) would be written into
  // and that are shared, so must be copied first.
  int32_t shared_blocks_to_write(const Sequence& seq, int n_positions) const;
  void make_writable(Sequence& seq, int n_positions);

  BlockPool pool_;
  int max_context_;
  KvLayoutMode mode_;
  int window_ = 0;
  int32_t window_blocks_ = 0;  // the most blocks a windowed sequence holds at once
  std::unordered_map<int32_t, Sequence> sequences_;
  bool recording_ = false;
  std::vector<KvOp> pending_ops_;
};

}  // namespace rapide
