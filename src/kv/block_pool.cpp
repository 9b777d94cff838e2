#include "kv/block_pool.h"

#include <fmt/format.h>

#include <limits>
#include <string>

#include "base/error.h"
#include "kernels/kv_rows.h"
#include "kv/memory_budget.h"

namespace rapide {

BlockPool::BlockPool(const KvLayout& layout, int32_t n_blocks)
    : layout_(layout), block_bytes_(layout.block_bytes()), n_blocks_(n_blocks) {
  if (block_bytes_ == 0) {
    fail(ErrorCode::kInvalidArgument,
         "KV layout has empty blocks ({} layers, {} KV heads, {} "
         "head dim, block size {})",
         layout.n_layers, layout.n_kv_heads, layout.head_dim, layout.block_size);
  }
  check_kv_layout(layout);
  if (n_blocks < 1) fail(ErrorCode::kInvalidArgument, "a block pool needs >= 1 block");
  blocks_.resize(static_cast<size_t>(n_blocks) + 1);
  BlockInfo& sentinel = blocks_[n_blocks_];
  sentinel.prev = sentinel.next = n_blocks_;
  // Ascending ids from the front: the first sequences get low, adjacent blocks.
  for (int32_t b = 0; b < n_blocks_; ++b) push_back(b);
  n_free_ = n_blocks_;
  memory_.resize(static_cast<size_t>(n_blocks_) * block_bytes_);
}

int32_t BlockPool::blocks_for_budget(const KvLayout& layout, uint64_t budget_bytes) {
  const uint64_t block_bytes = layout.block_bytes();
  if (block_bytes == 0) fail(ErrorCode::kInvalidArgument, "KV layout has empty blocks");
  const uint64_t blocks = budget_bytes / block_bytes;
  if (blocks == 0) {
    fail(ErrorCode::kResourceExhausted,
         "KV memory budget {} is smaller than one KV block ({}: {} positions x {} layers x {} KV "
         "heads x {} head dim x K and V, {})",
         format_bytes(budget_bytes), format_bytes(block_bytes), layout.block_size, layout.n_layers,
         layout.n_kv_heads, layout.head_dim, kv_type_name(layout.type));
  }
  if (blocks > static_cast<uint64_t>(std::numeric_limits<int32_t>::max() - 1)) {
    fail(ErrorCode::kInvalidArgument, "KV memory budget {} makes {} blocks, more than int32 ids",
         format_bytes(budget_bytes), blocks);
  }
  return static_cast<int32_t>(blocks);
}

size_t BlockPool::checked(int32_t block) const {
  if (block < 0 || block >= n_blocks_) {
    fail(ErrorCode::kOutOfRange, "KV block {} outside the pool's {} blocks", block, n_blocks_);
  }
  return static_cast<size_t>(block);
}

int32_t BlockPool::try_allocate() {
  if (n_free_ == 0) return -1;
  const int32_t block = blocks_[n_blocks_].next;
  unlink(block);
  --n_free_;
  BlockInfo& info = blocks_[block];
  if (info.has_hash) {
    // Plain free blocks sit in front, so reaching a cached one means none were left:
    // this is an LRU eviction.
    --n_cached_free_;
    const uint64_t old_hash = info.hash;
    info.has_hash = false;
    info.hash = 0;
    if (on_evict_) on_evict_(block, old_hash);
  }
  info.ref_count = 1;
  return block;
}

int32_t BlockPool::allocate() {
  const int32_t block = try_allocate();
  if (block < 0) {
    fail(ErrorCode::kResourceExhausted, "KV cache is full: all {} blocks ({}) are in use",
         n_blocks_, format_bytes(memory_bytes()));
  }
  return block;
}

void BlockPool::touch(int32_t block) {
  BlockInfo& info = blocks_[checked(block)];
  if (info.ref_count == 0) {
    unlink(block);
    --n_free_;
    if (info.has_hash) --n_cached_free_;
  }
  ++info.ref_count;
}

void BlockPool::free(int32_t block) {
  BlockInfo& info = blocks_[checked(block)];
  if (info.ref_count <= 0) {
    fail(ErrorCode::kInternal, "KV block {} freed more often than it was referenced", block);
  }
  if (--info.ref_count > 0) return;
  ++n_free_;
  if (info.has_hash) {
    ++n_cached_free_;
    push_back(block);
  } else {
    push_front(block);
  }
}

void BlockPool::set_hash(int32_t block, uint64_t hash) {
  BlockInfo& info = blocks_[checked(block)];
  const bool had_hash = info.has_hash;
  info.has_hash = true;
  info.hash = hash;
  if (info.ref_count == 0 && !had_hash) {
    unlink(block);
    push_back(block);
    ++n_cached_free_;
  }
}

void BlockPool::clear_hash(int32_t block) {
  BlockInfo& info = blocks_[checked(block)];
  if (!info.has_hash) return;
  const uint64_t old_hash = info.hash;
  info.has_hash = false;
  info.hash = 0;
  if (info.ref_count == 0) {
    unlink(block);
    push_front(block);
    --n_cached_free_;
  }
  if (on_evict_) on_evict_(block, old_hash);
}

void BlockPool::link_after(int32_t after, int32_t block) {
  const int32_t next = blocks_[after].next;
  blocks_[block].prev = after;
  blocks_[block].next = next;
  blocks_[after].next = block;
  blocks_[next].prev = block;
}

void BlockPool::push_front(int32_t block) {
  link_after(n_blocks_, block);
}

void BlockPool::push_back(int32_t block) {
  link_after(blocks_[n_blocks_].prev, block);
}

void BlockPool::unlink(int32_t block) {
  BlockInfo& info = blocks_[block];
  blocks_[info.prev].next = info.next;
  blocks_[info.next].prev = info.prev;
  info.prev = info.next = kNone;
}

void BlockPool::check_no_leaks() const {
  std::string leaked;
  int32_t n_leaked = 0;
  for (int32_t b = 0; b < n_blocks_; ++b) {
    const int32_t refs = blocks_[b].ref_count;
    if (refs == 0) continue;
    if (++n_leaked <= 16) leaked += fmt::format(" {} (ref {})", b, refs);
  }
  if (n_leaked > 0) {
    fail(ErrorCode::kInternal, "{} KV blocks still referenced:{}{}", n_leaked, leaked,
         n_leaked > 16 ? " ..." : "");
  }
  // Walk the queue: a block lost from it would be a leak the reference counts cannot show.
  int32_t in_queue = 0, cached = 0;
  for (int32_t b = blocks_[n_blocks_].next; b != n_blocks_; b = blocks_[b].next) {
    if (b < 0 || b >= n_blocks_ || ++in_queue > n_blocks_) {
      fail(ErrorCode::kInternal, "KV free queue is corrupt");
    }
    cached += blocks_[b].has_hash ? 1 : 0;
  }
  if (in_queue != n_blocks_ || n_free_ != n_blocks_ || cached != n_cached_free_) {
    fail(ErrorCode::kInternal,
         "KV free queue holds {} of {} blocks ({} cached) but the counters say {} free ({} "
         "cached)",
         in_queue, n_blocks_, cached, n_free_, n_cached_free_);
  }
}

}  // namespace rapide
