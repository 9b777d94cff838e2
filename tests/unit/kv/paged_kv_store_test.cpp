// PagedKvStore: block tables that grow, roll back and release; errors a scheduler can act
// on; export/import; shared blocks with copy-on-write.
#include "kv/paged_kv_store.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "base/error.h"
#include "kernels/attention_value_weights.h"

namespace rapide {
namespace {

// 2 layers x 2 KV heads x 16 positions x 4 dims x K,V x f32 = 2 KiB per block.
KvLayout small_layout() {
  return KvLayout{2, 2, 4, 16, KvType::kF32};
}

std::vector<int32_t> table_of(const PagedKvStore& kv, int32_t seq) {
  auto t = kv.block_table(seq);
  return {t.begin(), t.end()};
}

// Throws unless fn throws Error(code) whose message contains `needle`.
void expect_error(const std::function<void()>& fn, ErrorCode code, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "expected " << error_code_name(code);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

void fill(PagedKvStore& kv, int32_t block, uint8_t seed) {
  uint8_t* p = kv.block_data(block);
  for (size_t i = 0; i < kv.layout().block_bytes(); ++i) p[i] = static_cast<uint8_t>(seed + i * 7);
}

TEST(PagedKvStore, ReserveGrowsOneBlockPerBlockSizePositions) {
  PagedKvStore kv(small_layout(), 8, 128);
  EXPECT_TRUE(kv.block_table(0).empty());
  EXPECT_EQ(kv.blocks_needed(0, 1), 1);
  kv.reserve(0, 1);
  EXPECT_EQ(table_of(kv, 0).size(), 1u);
  EXPECT_EQ(kv.positions(0), 1);
  EXPECT_EQ(kv.blocks_needed(0, 16), 0);
  kv.reserve(0, 16);
  EXPECT_EQ(table_of(kv, 0).size(), 1u);
  EXPECT_EQ(kv.blocks_needed(0, 17), 1);
  EXPECT_EQ(kv.blocks_needed(0, 48), 2);
  kv.reserve(0, 17);
  EXPECT_EQ(table_of(kv, 0), (std::vector<int32_t>{0, 1}));
  // Reserving fewer positions than held changes nothing (truncate shrinks).
  kv.reserve(0, 5);
  EXPECT_EQ(kv.positions(0), 17);
  kv.reserve(1, 40);
  EXPECT_EQ(table_of(kv, 1), (std::vector<int32_t>{2, 3, 4}));
  EXPECT_EQ(kv.used_blocks(), 5);
  EXPECT_EQ(kv.free_blocks(), 3);
  EXPECT_EQ(kv.sequence_count(), 2);
  kv.release(0);
  kv.release(1);
  kv.release(7);  // unknown: nothing to do
  kv.check_no_leaks();
}

TEST(PagedKvStore, TryReserveIsAllOrNothing) {
  PagedKvStore kv(small_layout(), 6, 128);
  kv.reserve(0, 40);  // 3 blocks
  kv.reserve(2, 16);  // 1 block
  EXPECT_TRUE(kv.can_reserve(1, 32));
  EXPECT_FALSE(kv.can_reserve(1, 33));
  EXPECT_FALSE(kv.try_reserve(1, 33));
  EXPECT_FALSE(kv.has_sequence(1));
  EXPECT_EQ(kv.free_blocks(), 2);
  EXPECT_FALSE(kv.try_reserve(0, 81));  // 3 more blocks, 2 free
  EXPECT_EQ(kv.positions(0), 40);
  EXPECT_EQ(table_of(kv, 0).size(), 3u);
  // A scheduler's question "do these sequences fit?" is a sum over blocks_needed.
  EXPECT_EQ(kv.blocks_needed(0, 48) + kv.blocks_needed(1, 1), 1);
  EXPECT_EQ(kv.blocks_needed(0, 49) + kv.blocks_needed(1, 1), 2);
  kv.release(0);
  kv.release(2);
  kv.check_no_leaks();
}

TEST(PagedKvStore, ExhaustionAndNeverFittingRequestsAreClearErrors) {
  PagedKvStore kv(small_layout(), 4, 1000);
  kv.reserve(0, 50);
  expect_error([&] { kv.reserve(1, 20); }, ErrorCode::kResourceExhausted,
               "KV cache full: sequence 1 needs 2 more blocks to hold 20 positions, 0 of 4 "
               "blocks are free");
  // 65 positions need 5 blocks: more than the whole pool, so waiting would never help.
  kv.release(0);
  expect_error([&] { kv.try_reserve(2, 65); }, ErrorCode::kResourceExhausted,
               "sequence 2 can never fit: 65 positions need 5 KV blocks");
  expect_error([&] { kv.reserve(2, 1001); }, ErrorCode::kOutOfRange, "beyond the max context 1000");
  expect_error([&] { kv.reserve(2, -1); }, ErrorCode::kInvalidArgument, "negative");
  EXPECT_FALSE(kv.can_reserve(2, 1001));
  EXPECT_TRUE(kv.can_ever_fit(64));
  EXPECT_FALSE(kv.can_ever_fit(65));
  EXPECT_FALSE(kv.can_ever_fit(1001));
  kv.check_no_leaks();
}

TEST(PagedKvStore, ReleaseReturnsEveryBlockAtOnce) {
  PagedKvStore kv(small_layout(), 32, 512);
  for (int32_t s = 0; s < 5; ++s) kv.reserve(s, 30 + 20 * s);
  EXPECT_EQ(kv.used_blocks(), 2 + 4 + 5 + 6 + 7);  // ceil(30, 50, 70, 90, 110 / 16)
  expect_error([&] { kv.check_no_leaks(); }, ErrorCode::kInternal, "never released");
  for (int32_t s = 0; s < 5; ++s) kv.release(s);
  EXPECT_EQ(kv.free_blocks(), 32);
  EXPECT_EQ(kv.sequence_count(), 0);
  kv.check_no_leaks();
}

TEST(PagedKvStore, TruncateFreesExactlyTheBlocksPastTheNewEnd) {
  PagedKvStore kv(small_layout(), 8, 512);
  kv.reserve(0, 10);
  kv.reserve(1, 64);  // blocks 1..4
  kv.reserve(0, 20);  // block 5
  EXPECT_EQ(table_of(kv, 1), (std::vector<int32_t>{1, 2, 3, 4}));

  kv.truncate(1, 49);  // positions 0..48 need blocks 0..3 of the table
  EXPECT_EQ(table_of(kv, 1), (std::vector<int32_t>{1, 2, 3, 4}));
  EXPECT_EQ(kv.positions(1), 49);
  kv.truncate(1, 48);  // now 3 blocks suffice: block 4 goes back
  EXPECT_EQ(table_of(kv, 1), (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(kv.pool().ref_count(4), 0);
  kv.truncate(1, 17);
  EXPECT_EQ(table_of(kv, 1), (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(kv.free_blocks(), 8 - 4);
  // The other sequence is untouched.
  EXPECT_EQ(table_of(kv, 0), (std::vector<int32_t>{0, 5}));
  // Growing again after a rollback reuses the freed blocks, most recently freed first.
  kv.reserve(1, 40);
  EXPECT_EQ(table_of(kv, 1), (std::vector<int32_t>{1, 2, 3}));
  kv.truncate(1, 0);
  EXPECT_TRUE(kv.block_table(1).empty());
  EXPECT_TRUE(kv.has_sequence(1));
  expect_error([&] { kv.truncate(0, 21); }, ErrorCode::kInvalidArgument, "from 20 to 21");
  expect_error([&] { kv.truncate(9, 0); }, ErrorCode::kInvalidArgument, "unknown");
  kv.release(0);
  kv.release(1);
  kv.check_no_leaks();
}

TEST(PagedKvStore, ContiguousModeReservesMaxContextAtAdmission) {
  PagedKvStore kv(small_layout(), 20, 100, KvLayoutMode::kContiguous);
  EXPECT_EQ(kv.blocks_for_new_sequence(1), 7);
  EXPECT_EQ(kv.blocks_needed(0, 1), 7);
  kv.reserve(0, 1);
  EXPECT_EQ(table_of(kv, 0).size(), 7u);
  EXPECT_EQ(kv.blocks_needed(0, 100), 0);
  kv.reserve(0, 100);
  EXPECT_EQ(table_of(kv, 0).size(), 7u);
  // Rolling back keeps the reservation: that is what contiguous means.
  kv.truncate(0, 3);
  EXPECT_EQ(table_of(kv, 0).size(), 7u);
  EXPECT_EQ(kv.wasted_positions(0), 7 * 16 - 3);
  kv.reserve(1, 5);
  EXPECT_FALSE(kv.try_reserve(2, 1));  // 14 of 20 blocks used, 6 left < 7
  expect_error([&] { kv.append_blocks(3, std::vector<int32_t>{0}, 16); }, ErrorCode::kUnsupported,
               "paged");
  kv.release(0);
  kv.release(1);
  kv.check_no_leaks();
}

TEST(PagedKvStore, WastedMemoryStaysBelowOneBlockPerSequenceWhenPaged) {
  const KvLayout layout = small_layout();
  const int bs = layout.block_size;
  const uint64_t bytes_per_position = layout.block_bytes() / bs;
  PagedKvStore paged(layout, 1000, 2048);
  PagedKvStore contiguous(layout, 1000, 2048, KvLayoutMode::kContiguous);
  for (int32_t s = 0; s < 7; ++s) {
    const int length = 1 + 37 * s;
    paged.reserve(s, length);
    EXPECT_LT(paged.wasted_positions(s), bs);
    EXPECT_LT(paged.wasted_bytes(s), layout.block_bytes());
    EXPECT_EQ(paged.wasted_bytes(s),
              static_cast<uint64_t>(paged.wasted_positions(s)) * bytes_per_position);
    contiguous.reserve(s, length);
    EXPECT_EQ(contiguous.wasted_positions(s), 2048 - length);
  }
  const KvUsage u = paged.usage();
  EXPECT_EQ(u.sequences, 7);
  EXPECT_EQ(u.used_positions, 7 + 37 * 21);
  EXPECT_EQ(u.reserved_positions, static_cast<int64_t>(u.used_blocks) * bs);
  EXPECT_LT(u.wasted_bytes, 7 * layout.block_bytes());
  for (int32_t s = 0; s < 7; ++s) {
    paged.release(s);
    contiguous.release(s);
  }
  paged.check_no_leaks();
  contiguous.check_no_leaks();
}

TEST(PagedKvStore, ExportImportRoundTripIsBitExact) {
  PagedKvStore kv(small_layout(), 8, 256);
  kv.reserve(0, 40);
  const std::vector<int32_t> source = table_of(kv, 0);
  for (size_t i = 0; i < source.size(); ++i) fill(kv, source[i], static_cast<uint8_t>(11 * i + 3));

  std::vector<std::vector<uint8_t>> exported;
  for (int32_t b : source) exported.push_back(kv.export_block(b));
  ASSERT_EQ(exported[0].size(), kv.layout().block_bytes());

  // Another "machine": import the blocks into a new sequence (prefill -> decode transfer).
  std::vector<int32_t> imported;
  for (const auto& bytes : exported) imported.push_back(kv.import_block(bytes));
  kv.append_blocks(1, imported, 40);
  for (int32_t b : imported) kv.pool().free(b);  // the sequence holds the only reference now
  EXPECT_EQ(kv.positions(1), 40);
  const std::vector<int32_t> copy = table_of(kv, 1);
  ASSERT_EQ(copy.size(), source.size());
  for (size_t i = 0; i < copy.size(); ++i) {
    EXPECT_NE(copy[i], source[i]);
    EXPECT_EQ(kv.pool().ref_count(copy[i]), 1);
    EXPECT_EQ(
        std::memcmp(kv.block_data(copy[i]), kv.block_data(source[i]), kv.layout().block_bytes()),
        0);
  }
  std::vector<uint8_t> out(kv.layout().block_bytes());
  kv.export_block(copy[2], out);
  EXPECT_EQ(out, exported[2]);

  expect_error([&] { kv.import_block(std::vector<uint8_t>(100)); }, ErrorCode::kInvalidArgument,
               "100 bytes");
  std::vector<uint8_t> small(10);
  expect_error([&] { kv.export_block(copy[0], small); }, ErrorCode::kInvalidArgument, "10-byte");
  kv.release(0);
  kv.release(1);
  kv.check_no_leaks();
}

TEST(PagedKvStore, SharedBlocksLiveUntilTheirLastUserAndAreCopiedBeforeAWrite) {
  PagedKvStore kv(small_layout(), 8, 256);
  kv.reserve(0, 32);
  const std::vector<int32_t> prefix = table_of(kv, 0);
  fill(kv, prefix[0], 1);
  fill(kv, prefix[1], 2);

  // Sequence 1 reuses sequence 0's two full blocks, then grows on its own.
  kv.append_blocks(1, prefix, 32);
  EXPECT_EQ(kv.pool().ref_count(prefix[0]), 2);
  kv.reserve(1, 40);
  EXPECT_EQ(table_of(kv, 1).size(), 3u);
  EXPECT_EQ(kv.used_blocks(), 3);

  // Sequence 1 rolls back into the shared block 1 and writes there: it gets a private copy.
  kv.truncate(1, 20);
  EXPECT_EQ(kv.blocks_needed(1, 24), 1);
  kv.reserve(1, 24);
  const std::vector<int32_t> mine = table_of(kv, 1);
  EXPECT_EQ(mine[0], prefix[0]);
  EXPECT_NE(mine[1], prefix[1]);
  EXPECT_EQ(kv.pool().ref_count(prefix[1]), 1);
  EXPECT_EQ(
      std::memcmp(kv.block_data(mine[1]), kv.block_data(prefix[1]), kv.layout().block_bytes()), 0);
  std::memset(kv.block_data(mine[1]), 0xff, 64);
  EXPECT_NE(kv.block_data(prefix[1])[0], 0xff);

  // Releasing the first user keeps the shared block alive for the second.
  kv.release(0);
  EXPECT_EQ(kv.pool().ref_count(prefix[0]), 1);
  EXPECT_EQ(kv.pool().ref_count(prefix[1]), 0);
  kv.release(1);
  kv.check_no_leaks();
}

TEST(PagedKvStore, CachedBlocksAreReusedAndForgottenBeforeTheirContentChanges) {
  PagedKvStore kv(small_layout(), 4, 256);
  std::vector<int32_t> dropped;
  kv.pool().set_eviction_listener([&](int32_t block, uint64_t) { dropped.push_back(block); });
  kv.reserve(0, 32);
  const std::vector<int32_t> prefix = table_of(kv, 0);
  kv.pool().set_hash(prefix[0], 100);
  kv.pool().set_hash(prefix[1], 101);
  kv.release(0);
  EXPECT_EQ(kv.pool().cached_free_blocks(), 2);

  // A later request hits the cache: the blocks come back without being recomputed.
  kv.append_blocks(5, prefix, 32);
  EXPECT_EQ(kv.pool().cached_free_blocks(), 0);
  EXPECT_EQ(kv.used_blocks(), 2);
  // Rolling back into a cached block it owns alone: the hash is dropped, no copy needed.
  kv.truncate(5, 30);
  EXPECT_EQ(kv.blocks_needed(5, 31), 0);
  kv.reserve(5, 31);
  EXPECT_EQ(table_of(kv, 5), prefix);
  EXPECT_EQ(dropped, std::vector<int32_t>{prefix[1]});
  EXPECT_FALSE(kv.pool().has_hash(prefix[1]));
  EXPECT_TRUE(kv.pool().has_hash(prefix[0]));
  // A plain free block cannot be appended: its bytes mean nothing.
  expect_error([&] { kv.append_blocks(6, std::vector<int32_t>{3}, 16); },
               ErrorCode::kInvalidArgument, "free");
  expect_error([&] { kv.append_blocks(5, std::vector<int32_t>{prefix[0]}, 16); },
               ErrorCode::kInvalidArgument, "block boundary");
  expect_error([&] { kv.append_blocks(6, prefix, 10); }, ErrorCode::kInvalidArgument,
               "cannot hold exactly 10");
  kv.release(5);
  kv.check_no_leaks();
}

TEST(KvLayoutMode, ParsesTheFlagValues) {
  EXPECT_EQ(parse_kv_layout_mode("paged"), KvLayoutMode::kPaged);
  EXPECT_EQ(parse_kv_layout_mode("contiguous"), KvLayoutMode::kContiguous);
  EXPECT_STREQ(kv_layout_mode_name(KvLayoutMode::kContiguous), "contiguous");
  expect_error([] { parse_kv_layout_mode("Paged!"); }, ErrorCode::kInvalidArgument,
               "paged or contiguous");
}

// Window 40 over 16-position blocks: the query at position 100 sees keys 61..100, and
// attention reads from the value chunk (32 positions) holding block 3's start: block 2.
TEST(PagedKvStore, SlidingWindowFreesTheBlocksNoLaterQueryReads) {
  PagedKvStore kv(small_layout(), 16, 10000);
  kv.set_sliding_window(40, 8);
  kv.reserve(0, 100);
  const std::vector<int32_t> before = table_of(kv, 0);
  kv.pool().set_hash(before[0], 77);  // a prefix-cache block: stays cached once freed
  EXPECT_EQ(kv.free_outside_window(0, 100), 2);
  EXPECT_EQ(kv.free_outside_window(0, 100), 0);  // idempotent
  const std::vector<int32_t> after = table_of(kv, 0);
  ASSERT_EQ(after.size(), before.size());
  EXPECT_EQ(after[0], kFreedBlock);
  EXPECT_EQ(after[1], kFreedBlock);
  EXPECT_TRUE(std::equal(after.begin() + 2, after.end(), before.begin() + 2));
  EXPECT_EQ(kv.free_blocks(), 16 - 5);
  EXPECT_EQ(kv.pool().cached_free_blocks(), 1);
  const KvUsage u = kv.usage();
  EXPECT_EQ(u.used_positions, 100 - 32);
  EXPECT_EQ(u.reserved_positions, (7 - 2) * 16);
  EXPECT_EQ(kv.wasted_positions(0), 12);

  // Rolling back a few rejected guesses is fine; back to where freed blocks are read is not.
  kv.truncate(0, 95);
  expect_error([&] { kv.truncate(0, 60); }, ErrorCode::kInvalidArgument, "sliding window");
  EXPECT_EQ(kv.positions(0), 95);
  kv.release(0);  // skips the freed entries: a double free would throw
  kv.check_no_leaks();
}

// Whatever the block size and step, a sequence far longer than the pool runs in a pool of
// exactly the windowed bound, never holding more: freeing keeps up with growth.
TEST(PagedKvStore, SlidingWindowBoundsWhatASequenceHoldsForever) {
  for (int block_size : {4, 8, 16, 32, 48}) {
    for (int step : {1, 7, 64}) {
      SCOPED_TRACE(fmt::format("block {} step {}", block_size, step));
      const int window = 37;
      PagedKvStore probe(KvLayout{1, 1, 4, block_size, KvType::kF32}, 1, 100000);
      probe.set_sliding_window(window, step);
      const int32_t bound = probe.blocks_for_new_sequence(100000);
      EXPECT_EQ(probe.blocks_for_new_sequence(10), (10 + block_size - 1) / block_size);
      PagedKvStore kv(KvLayout{1, 1, 4, block_size, KvType::kF32}, bound, 100000);
      kv.set_sliding_window(window, step);
      ASSERT_TRUE(kv.can_ever_fit(100000));
      int32_t most = 0;
      for (int n = 0; n < 5000; n += step) {
        kv.free_outside_window(0, n);
        ASSERT_TRUE(kv.try_reserve(0, n + step)) << "at " << n;
        most = std::max(most, kv.used_blocks());
        // Every block the next queries read is still there.
        const auto table = kv.block_table(0);
        for (int q = n; q < n + step; ++q) {
          for (size_t b = static_cast<size_t>(first_block_read(q + 1, window, block_size));
               b <= static_cast<size_t>(q / block_size); ++b) {
            ASSERT_NE(table[b], kFreedBlock) << "query " << q << " block " << b;
          }
        }
      }
      EXPECT_LE(most, bound);
      EXPECT_LE(bound, (window + step + 32) / block_size + 3);
      kv.release(0);
      kv.check_no_leaks();
    }
  }
}

TEST(PagedKvStore, SlidingWindowDoesNothingWithoutAWindowOrInContiguousMode) {
  PagedKvStore plain(small_layout(), 16, 1000);
  plain.reserve(0, 200);
  EXPECT_EQ(plain.free_outside_window(0, 200), 0);
  PagedKvStore contiguous(small_layout(), 70, 1000, KvLayoutMode::kContiguous);
  contiguous.set_sliding_window(40, 8);
  contiguous.reserve(0, 200);
  EXPECT_EQ(contiguous.free_outside_window(0, 200), 0);
  EXPECT_EQ(contiguous.blocks_for_new_sequence(10), 63);
  plain.release(0);
  contiguous.release(0);
  expect_error([&] { plain.set_sliding_window(-1, 8); }, ErrorCode::kInvalidArgument, "window");
}

}  // namespace
}  // namespace rapide
