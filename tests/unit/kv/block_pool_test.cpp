// BlockPool: O(1) allocate/free, reference counts, exhaustion, leak checks, and the
// evictable-cached state that issue 5's prefix cache builds on.
#include "kv/block_pool.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"

namespace rapide {
namespace {

// 2 layers x 2 KV heads x 16 positions x 4 dims x K,V x f32 = 2 KiB per block.
KvLayout small_layout() {
  return KvLayout{2, 2, 4, 16, KvType::kF32};
}

ErrorCode code_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.code();
  }
  ADD_FAILURE() << "expected an Error";
  return ErrorCode::kInternal;
}

TEST(BlockPool, SizesOneAllocationFromTheLayout) {
  BlockPool pool(small_layout(), 10);
  EXPECT_EQ(pool.block_bytes(), 2048u);
  EXPECT_EQ(pool.memory_bytes(), 10u * 2048u);
  EXPECT_EQ(pool.total_blocks(), 10);
  EXPECT_EQ(pool.free_blocks(), 10);
  EXPECT_EQ(pool.used_blocks(), 0);
  // One allocation: block b starts b * block_bytes after block 0, 64-byte aligned.
  EXPECT_EQ(reinterpret_cast<uintptr_t>(pool.data(0)) % 64, 0u);
  EXPECT_EQ(pool.data(7) - pool.data(0), 7 * 2048);
  EXPECT_EQ(code_of([&] { pool.data(10); }), ErrorCode::kOutOfRange);
  EXPECT_EQ(code_of([&] { pool.data(-1); }), ErrorCode::kOutOfRange);
}

TEST(BlockPool, BlocksForBudget) {
  const KvLayout layout = small_layout();
  EXPECT_EQ(BlockPool::blocks_for_budget(layout, 2048), 1);
  EXPECT_EQ(BlockPool::blocks_for_budget(layout, 2048 * 100 + 2047), 100);
  EXPECT_EQ(BlockPool::blocks_for_budget(layout, uint64_t{1} << 30), 524288);
  try {
    BlockPool::blocks_for_budget(layout, 2047);
    FAIL() << "a budget below one block must be rejected";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kResourceExhausted);
    EXPECT_NE(std::string(e.what()).find("smaller than one KV block"), std::string::npos)
        << e.what();
  }
}

TEST(BlockPool, AllocateFreeAndReferenceCounts) {
  BlockPool pool(small_layout(), 4);
  std::vector<int32_t> blocks;
  for (int i = 0; i < 4; ++i) blocks.push_back(pool.allocate());
  EXPECT_EQ(blocks, (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(pool.used_blocks(), 4);
  EXPECT_EQ(pool.free_blocks(), 0);
  for (int32_t b : blocks) EXPECT_EQ(pool.ref_count(b), 1);

  // A shared block is freed only when its last user lets go.
  pool.touch(2);
  EXPECT_EQ(pool.ref_count(2), 2);
  pool.free(2);
  EXPECT_EQ(pool.ref_count(2), 1);
  EXPECT_EQ(pool.free_blocks(), 0);
  pool.free(2);
  EXPECT_EQ(pool.ref_count(2), 0);
  EXPECT_EQ(pool.free_blocks(), 1);

  // The block freed last is handed out first (its pages are the warmest).
  pool.free(0);
  EXPECT_EQ(pool.allocate(), 0);
  EXPECT_EQ(pool.allocate(), 2);
  for (int32_t b : blocks) pool.free(b);
  pool.check_no_leaks();
}

TEST(BlockPool, ExhaustionIsAClearError) {
  BlockPool pool(small_layout(), 2);
  const int32_t a = pool.allocate();
  const int32_t b = pool.allocate();
  EXPECT_EQ(pool.try_allocate(), -1);
  try {
    pool.allocate();
    FAIL() << "allocate on a full pool must throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kResourceExhausted);
    EXPECT_NE(std::string(e.what()).find("all 2 blocks"), std::string::npos) << e.what();
  }
  pool.free(a);
  pool.free(b);
  pool.check_no_leaks();
}

TEST(BlockPool, DoubleFreeIsAnInternalError) {
  BlockPool pool(small_layout(), 2);
  const int32_t a = pool.allocate();
  pool.free(a);
  EXPECT_EQ(code_of([&] { pool.free(a); }), ErrorCode::kInternal);
  pool.check_no_leaks();
}

TEST(BlockPool, CheckNoLeaksNamesReferencedBlocks) {
  BlockPool pool(small_layout(), 8);
  pool.allocate();
  const int32_t b = pool.allocate();
  pool.touch(b);
  try {
    pool.check_no_leaks();
    FAIL() << "leaked blocks must be reported";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInternal);
    EXPECT_NE(std::string(e.what()).find("2 KV blocks still referenced: 0 (ref 1) 1 (ref 2)"),
              std::string::npos)
        << e.what();
  }
  pool.free(0);
  pool.free(b);
  pool.free(b);
  pool.check_no_leaks();
}

TEST(BlockPool, CachedBlocksAreEvictedLastAndLeastRecentlyUsedFirst) {
  BlockPool pool(small_layout(), 4);
  std::vector<std::pair<int32_t, uint64_t>> evicted;
  pool.set_eviction_listener(
      [&](int32_t block, uint64_t hash) { evicted.emplace_back(block, hash); });
  for (int i = 0; i < 4; ++i) pool.allocate();
  pool.set_hash(1, 111);
  pool.set_hash(3, 333);
  // Freed in this order: 3 (cached), 0 (plain), 1 (cached), 2 (plain).
  pool.free(3);
  pool.free(0);
  pool.free(1);
  pool.free(2);
  EXPECT_EQ(pool.free_blocks(), 4);
  EXPECT_EQ(pool.cached_free_blocks(), 2);
  EXPECT_EQ(pool.used_blocks(), 0);
  pool.check_no_leaks();  // cached content is not a leak

  // Plain free blocks go first; then cached ones, least recently freed first.
  EXPECT_EQ(pool.allocate(), 2);
  EXPECT_EQ(pool.allocate(), 0);
  EXPECT_TRUE(evicted.empty());
  EXPECT_EQ(pool.allocate(), 3);
  ASSERT_EQ(evicted.size(), 1u);
  EXPECT_EQ(evicted[0], std::make_pair(int32_t{3}, uint64_t{333}));
  EXPECT_FALSE(pool.has_hash(3));
  EXPECT_EQ(pool.cached_free_blocks(), 1);

  // A hit on a cached free block revives it in O(1) without losing its content hash.
  EXPECT_TRUE(pool.has_hash(1));
  pool.touch(1);
  EXPECT_EQ(pool.ref_count(1), 1);
  EXPECT_EQ(pool.free_blocks(), 0);
  EXPECT_EQ(pool.cached_free_blocks(), 0);
  EXPECT_EQ(pool.hash(1), 111u);
  EXPECT_EQ(evicted.size(), 1u);
  for (int32_t b : {0, 1, 2, 3}) pool.free(b);
  pool.check_no_leaks();
}

TEST(BlockPool, ClearingAHashMakesAFreeBlockPlainAndTellsTheListener) {
  BlockPool pool(small_layout(), 3);
  std::vector<int32_t> dropped;
  pool.set_eviction_listener([&](int32_t block, uint64_t) { dropped.push_back(block); });
  for (int i = 0; i < 3; ++i) pool.allocate();
  pool.set_hash(0, 7);
  pool.free(1);
  pool.free(0);  // cached: back of the queue
  pool.free(2);
  EXPECT_EQ(pool.cached_free_blocks(), 1);
  pool.clear_hash(0);
  EXPECT_EQ(dropped, std::vector<int32_t>{0});
  EXPECT_EQ(pool.cached_free_blocks(), 0);
  // Now plain, it moved to the front of the queue.
  EXPECT_EQ(pool.allocate(), 0);
  // Setting a hash on a free block turns it into an evictable cached one.
  pool.set_hash(1, 9);
  EXPECT_EQ(pool.cached_free_blocks(), 1);
  EXPECT_EQ(pool.allocate(), 2);
  EXPECT_EQ(pool.allocate(), 1);
  EXPECT_EQ(dropped, (std::vector<int32_t>{0, 1}));
  for (int32_t b : {0, 1, 2}) pool.free(b);
  pool.check_no_leaks();
}

TEST(BlockPool, ManyOperationsKeepCountersConsistent) {
  BlockPool pool(small_layout(), 64);
  std::vector<int32_t> held;
  uint32_t state = 12345;
  auto next = [&] { return state = state * 1664525u + 1013904223u; };
  for (int step = 0; step < 10000; ++step) {
    const uint32_t r = next() % 4;
    if (r < 2 && pool.free_blocks() > 0) {
      held.push_back(pool.allocate());
      if (next() % 3 == 0) pool.set_hash(held.back(), next());
    } else if (r == 2 && !held.empty()) {
      const size_t i = next() % held.size();
      pool.free(held[i]);
      held.erase(held.begin() + static_cast<std::ptrdiff_t>(i));
    } else if (!held.empty()) {
      const int32_t b = held[next() % held.size()];
      pool.touch(b);
      held.push_back(b);
    }
    ASSERT_EQ(pool.used_blocks() + pool.free_blocks(), pool.total_blocks());
  }
  for (int32_t b : held) pool.free(b);
  pool.check_no_leaks();
}

}  // namespace
}  // namespace rapide
