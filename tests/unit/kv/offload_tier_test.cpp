// OffloadTier off the critical path (issue 49): with options.background, store() queues a raw
// copy and a worker compresses and writes files. Checked here: a queued or half-written block
// is already loadable and bit-exact, the background tier ends in the same state as the inline
// one, files are complete when the tier is destroyed (a restart finds every block), the
// bounded queue makes store() wait instead of growing, and dropped blocks are reported on
// the owner's thread only.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "kv/offload_tier.h"

namespace rapide {
namespace {

constexpr uint64_t kIdentity = 0x5eed0ff10adull;

// 2 layers x 2 heads x 16 slots x 32 dims, f16: 8 KiB K and V per block.
KvLayout layout() {
  return KvLayout{2, 2, 32, 16, KvType::kF16};
}

// Block `i`'s bytes: half random (so compression has work), half a repeated pattern.
std::vector<uint8_t> block_bytes(int i) {
  std::vector<uint8_t> b(layout().block_bytes());
  std::mt19937 rng(static_cast<uint32_t>(i) * 7919u + 1);
  for (size_t k = 0; k < b.size(); ++k) {
    b[k] = k < b.size() / 2 ? static_cast<uint8_t>(rng()) : static_cast<uint8_t>(k % 7 + i);
  }
  return b;
}

OffloadedBlockMeta meta(int i) {
  OffloadedBlockMeta m;
  m.hash = 0x1000 + static_cast<uint64_t>(i);
  m.parent = i == 0 ? 0 : 0x1000 + static_cast<uint64_t>(i) - 1;
  m.tokens.assign(16, i);
  return m;
}

class OffloadTierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           (std::string("rapide_offload_tier_test_") +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  OffloadTierOptions options(bool background, uint64_t ram_blocks, bool files) const {
    OffloadTierOptions o;
    o.background = background;
    o.codec = OffloadCodec::kZstd;
    o.ram_bytes = ram_blocks * layout().block_bytes();  // compressed blocks are smaller
    if (files) {
      o.dir = dir_.string();
      o.disk_bytes = 64ull << 20;
    }
    return o;
  }
  size_t files_in_dir() const {
    size_t n = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir_)) n += e.is_regular_file();
    return n;
  }
  std::filesystem::path dir_;
};

TEST_F(OffloadTierTest, AQueuedBlockIsContainedAndLoadsBitExactBeforeAndAfterTheWorker) {
  OffloadTier tier(options(/*background=*/true, 64, /*files=*/false), layout(), kIdentity);
  std::vector<uint8_t> out(layout().block_bytes());
  for (int i = 0; i < 32; ++i) {
    tier.store(meta(i), block_bytes(i));
    // Whatever the worker has done by now, the block is there and exact.
    ASSERT_TRUE(tier.contains(meta(i).hash)) << i;
    ASSERT_TRUE(tier.load(meta(i).hash, out)) << i;
    ASSERT_EQ(out, block_bytes(i)) << i;
  }
  tier.flush();
  const OffloadStats s = tier.stats();
  EXPECT_EQ(s.pending_blocks, 0u);
  EXPECT_EQ(s.stored_blocks, 32u);
  EXPECT_EQ(s.ram_blocks, 32u);
  EXPECT_LT(s.stored_bytes, s.bytes_out);  // compressed by the worker
  for (int i = 0; i < 32; ++i) {
    ASSERT_TRUE(tier.load(meta(i).hash, out)) << i;
    ASSERT_EQ(out, block_bytes(i)) << i;
  }
}

TEST_F(OffloadTierTest, BackgroundEndsInTheInlineTiersStateWithDemotionsToFiles) {
  // 4 blocks of compressed RAM, the rest demoted to files: both drivers of the same path.
  OffloadStats stats[2];
  for (bool background : {false, true}) {
    std::filesystem::remove_all(dir_);
    OffloadTier tier(options(background, 4, /*files=*/true), layout(), kIdentity);
    for (int i = 0; i < 24; ++i) tier.store(meta(i), block_bytes(i));
    tier.flush();
    std::vector<uint8_t> out(layout().block_bytes());
    for (int i = 0; i < 24; ++i) {
      ASSERT_TRUE(tier.load(meta(i).hash, out)) << i << (background ? " background" : " inline");
      ASSERT_EQ(out, block_bytes(i)) << i;
    }
    stats[background] = tier.stats();
    EXPECT_EQ(files_in_dir(), stats[background].disk_blocks);
  }
  EXPECT_EQ(stats[1].stored_blocks, stats[0].stored_blocks);
  EXPECT_EQ(stats[1].demoted_blocks, stats[0].demoted_blocks);
  EXPECT_GT(stats[1].demoted_blocks, 0u);
  EXPECT_EQ(stats[1].ram_blocks, stats[0].ram_blocks);
  EXPECT_EQ(stats[1].disk_blocks, stats[0].disk_blocks);
  EXPECT_EQ(stats[1].disk_used_bytes, stats[0].disk_used_bytes);
  EXPECT_EQ(stats[1].dropped_blocks, 0u);
}

TEST_F(OffloadTierTest, DestroyingTheTierFinishesItsQueueSoARestartFindsEveryBlock) {
  {
    // No RAM level: every block is a file write, and nobody flushes.
    OffloadTier tier(options(/*background=*/true, 0, /*files=*/true), layout(), kIdentity);
    for (int i = 0; i < 40; ++i) tier.store(meta(i), block_bytes(i));
  }
  OffloadTier again(options(/*background=*/true, 0, /*files=*/true), layout(), kIdentity);
  EXPECT_EQ(again.found().size(), 40u);
  EXPECT_EQ(again.stats().corrupt_blocks, 0u);
  std::vector<uint8_t> out(layout().block_bytes());
  for (int i = 0; i < 40; ++i) {
    ASSERT_TRUE(again.load(meta(i).hash, out)) << i;
    ASSERT_EQ(out, block_bytes(i)) << i;
  }
}

TEST_F(OffloadTierTest, AFullQueueMakesStoreWaitInsteadOfGrowing) {
  OffloadTierOptions o = options(/*background=*/true, 0, /*files=*/true);
  o.max_pending_bytes = layout().block_bytes();  // one block in flight at most
  OffloadTier tier(o, layout(), kIdentity);
  uint64_t most_pending = 0;
  for (int i = 0; i < 64; ++i) {
    tier.store(meta(i), block_bytes(i));
    most_pending = std::max(most_pending, tier.stats().pending_blocks);
  }
  tier.flush();
  const OffloadStats s = tier.stats();
  // One queued block, plus at most the one the worker holds.
  EXPECT_LE(most_pending, 2u);
  EXPECT_EQ(s.stored_blocks, 64u);
  EXPECT_EQ(s.disk_blocks, 64u);
}

TEST_F(OffloadTierTest, DropsAreReportedOnTheOwnersThreadOnly) {
  // RAM for 3 compressed blocks, no files: storing 20 drops 17, dropped by the worker.
  OffloadTierOptions o = options(/*background=*/true, 0, /*files=*/false);
  o.ram_bytes = 3 * (layout().block_bytes() / 2 + 256);
  OffloadTier tier(o, layout(), kIdentity);
  const std::thread::id owner = std::this_thread::get_id();
  std::vector<uint64_t> dropped;
  std::atomic<int> foreign_calls{0};
  tier.set_drop_listener([&](uint64_t hash) {
    if (std::this_thread::get_id() != owner) foreign_calls++;
    dropped.push_back(hash);
  });
  for (int i = 0; i < 20; ++i) tier.store(meta(i), block_bytes(i));
  tier.flush();
  tier.deliver_drops();
  EXPECT_EQ(foreign_calls.load(), 0);
  const OffloadStats s = tier.stats();
  EXPECT_EQ(s.ram_blocks, 3u);
  EXPECT_EQ(s.dropped_blocks, 17u);
  EXPECT_EQ(dropped.size(), 17u);
  for (uint64_t hash : dropped) EXPECT_FALSE(tier.contains(hash)) << hash;
  // The three most recent blocks stayed.
  for (int i = 17; i < 20; ++i) EXPECT_TRUE(tier.contains(meta(i).hash)) << i;
}

}  // namespace
}  // namespace rapide

namespace rapide {
namespace {

// A tensor/pipeline follower's tier (mirror_tier_options): forget() drops a block, its file
// too, queued or not, without telling the listener (the leader's tier made that decision);
// its files live in <dir>/rank<r>, it never drops on its own, and it starts empty: files a
// previous job left are removed, not indexed.
TEST_F(OffloadTierTest, AMirrorTierForgetsWhenToldStartsEmptyAndNeverDropsOnItsOwn) {
  OffloadTierOptions leader = options(/*background=*/true, 1, /*files=*/true);
  const OffloadTierOptions o = mirror_tier_options(leader, 3);
  EXPECT_EQ(o.dir, (dir_ / "rank3").string());
  EXPECT_EQ(o.codec, leader.codec);
  EXPECT_EQ(o.ram_bytes, leader.ram_bytes);
  EXPECT_FALSE(o.reuse_files);
  {
    OffloadTier tier(o, layout(), kIdentity);
    int listener_calls = 0;
    tier.set_drop_listener([&](uint64_t) { ++listener_calls; });
    // 1 block of RAM: the other 19 are demoted to files, none dropped.
    for (int i = 0; i < 20; ++i) tier.store(meta(i), block_bytes(i));
    tier.forget(meta(19).hash);  // possibly still queued
    tier.flush();
    tier.forget(meta(0).hash);  // on file by now
    tier.deliver_drops();
    EXPECT_EQ(listener_calls, 0);
    EXPECT_EQ(tier.stats().dropped_blocks, 0u);
    EXPECT_EQ(tier.size(), 18u);
    EXPECT_FALSE(tier.contains(meta(0).hash));
    EXPECT_FALSE(tier.contains(meta(19).hash));
    std::vector<uint8_t> out(layout().block_bytes());
    EXPECT_TRUE(tier.load(meta(7).hash, out));
    EXPECT_EQ(out, block_bytes(7));
  }
  EXPECT_FALSE(std::filesystem::exists(std::filesystem::path(o.dir) /
                                       block_file_name(kIdentity, meta(0).hash)));
  EXPECT_TRUE(std::filesystem::exists(std::filesystem::path(o.dir) /
                                      block_file_name(kIdentity, meta(7).hash)));
  OffloadTier again(o, layout(), kIdentity);
  EXPECT_TRUE(again.found().empty());
  EXPECT_EQ(again.size(), 0u);
  EXPECT_TRUE(std::filesystem::is_empty(o.dir));
  // Without files, the mirror's RAM level has no cap of its own.
  leader.dir.clear();
  EXPECT_GT(mirror_tier_options(leader, 1).ram_bytes, uint64_t{1} << 40);
}

}  // namespace
}  // namespace rapide
