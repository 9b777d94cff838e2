// BlockPool: every KV block of the engine, carved from one aligned allocation, with
// reference counts and an O(1) free queue (after vLLM v1's block_pool.py).
//
// A block is in one of three states:
//   in use             ref_count > 0; never handed out again, never evicted.
//   free               ref_count == 0, no content hash: reused before anything else.
//   evictable cached   ref_count == 0 but carrying a content hash (a full block whose tokens
//                      a later request may share, issue 5's prefix cache). It stays valid
//                      until allocate() runs out of plain free blocks and takes it, least
//                      recently freed first; the eviction listener then learns that its hash
//                      is gone, so the prefix cache's hash map never points at reused memory.
//
// The free queue is one doubly linked list threaded through per-block indices: plain free
// blocks are pushed at the front (taken first), cached ones at the back (LRU order), and a
// cached block that gets a new user (touch) leaves from the middle in O(1).
//
// Not thread-safe: one engine thread owns the pool (see ARCHITECTURE.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "base/huge_pages.h"
#include "kv/kv_store.h"

namespace rapide {

class BlockPool {
 public:
  // Called whenever a block loses its content hash: allocate() reusing an evictable cached
  // block (LRU eviction) or clear_hash(). Arguments: (block, the old hash). The block's
  // bytes are still intact during the call, so the offload tier can copy them out.
  using EvictionListener = std::function<void(int32_t block, uint64_t hash)>;

  // n_blocks > 0 blocks of layout.block_bytes() each, all free. The memory is not
  // touched here, so pages are committed as blocks are first written.
  BlockPool(const KvLayout& layout, int32_t n_blocks);
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;

  // How many blocks of `layout` fit `budget_bytes`. Throws Error(kResourceExhausted) when
  // not even one does, and kInvalidArgument for an empty layout or more blocks than int32.
  static int32_t blocks_for_budget(const KvLayout& layout, uint64_t budget_bytes);

  const KvLayout& layout() const { return layout_; }
  size_t block_bytes() const { return block_bytes_; }
  size_t memory_bytes() const { return memory_.size(); }

  int32_t total_blocks() const { return n_blocks_; }
  int32_t used_blocks() const { return n_blocks_ - n_free_; }
  // Blocks allocate() can hand out, evictable cached ones included.
  int32_t free_blocks() const { return n_free_; }
  // The part of free_blocks() that still holds cached content.
  int32_t cached_free_blocks() const { return n_cached_free_; }

  // A block with ref_count 1, taken from the front of the free queue. Throws
  // Error(kResourceExhausted) when every block is in use; try_allocate returns -1 instead.
  int32_t allocate();
  int32_t try_allocate();

  // One more user of a block. A free (cached) block leaves the free queue: this is how a
  // prefix-cache hit revives a block whose last user had finished.
  void touch(int32_t block);
  // One user fewer; at zero the block joins the free queue (back if cached, front if not).
  void free(int32_t block);
  int32_t ref_count(int32_t block) const { return blocks_[checked(block)].ref_count; }

  // Content hash of a full block (issue 5). Setting it on a free block, or clearing it,
  // moves it to the matching end of the free queue. clear_hash tells the listener, so the
  // prefix cache forgets a block whose content is about to change (copy-on-write owner).
  void set_hash(int32_t block, uint64_t hash);
  void clear_hash(int32_t block);
  bool has_hash(int32_t block) const { return blocks_[checked(block)].has_hash; }
  uint64_t hash(int32_t block) const { return blocks_[checked(block)].hash; }
  void set_eviction_listener(EvictionListener listener) { on_evict_ = std::move(listener); }

  uint8_t* data(int32_t block) { return memory_.data() + checked(block) * block_bytes_; }
  const uint8_t* data(int32_t block) const {
    return memory_.data() + checked(block) * block_bytes_;
  }

  // Throws Error(kInternal) naming the blocks still referenced, or if the free queue and
  // the counters disagree. Tests call it after every scenario.
  void check_no_leaks() const;

 private:
  struct BlockInfo {
    int32_t ref_count = 0;
    bool has_hash = false;
    uint64_t hash = 0;
    // Free-queue links; kNone when the block is in use.
    int32_t prev = kNone;
    int32_t next = kNone;
  };
  static constexpr int32_t kNone = -1;

  size_t checked(int32_t block) const;
  void push_front(int32_t block);
  void push_back(int32_t block);
  void unlink(int32_t block);
  void link_after(int32_t after, int32_t block);

  KvLayout layout_;
  size_t block_bytes_ = 0;
  int32_t n_blocks_ = 0;
  int32_t n_free_ = 0;
  int32_t n_cached_free_ = 0;
  // blocks_[n_blocks_] is the sentinel of the circular free queue.
  std::vector<BlockInfo> blocks_;
  LargeBuffer memory_;  // huge pages: attention reads runs far apart (base/huge_pages.h)
  EvictionListener on_evict_;
};

}  // namespace rapide
