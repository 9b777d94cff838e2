// PrefixCache over a PagedKvStore without a model: block hashes, matching and sharing,
// LRU eviction that never touches a block in use, miss explanations, and the offload tier
// (round trips bit-exact through every codec and through files; corrupt and foreign files
// are detected, counted and never used). Every scenario ends with check_no_leaks.
#include "kv/prefix_cache.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <xxhash.h>

#include <cstring>

#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include "kv/block_hash.h"

namespace rapide {
namespace {

constexpr int kBlock = 4;
constexpr uint64_t kIdentity = 0x5eed;

// 2 layers x 1 KV head x 4 positions x 4 dims x K,V x f32 = 256 bytes per block.
KvLayout tiny_layout() {
  return KvLayout{2, 1, 4, kBlock, KvType::kF32};
}

// What a forward pass would write: bytes determined by the token prefix, so a block's
// content is checkable wherever it travels.
uint8_t content_byte(std::span<const int32_t> prefix, size_t i) {
  const uint64_t h = hash_block_tokens(0, i, prefix);
  return static_cast<uint8_t>(h ^ (h >> 29));
}

struct Seq {
  Seq(int32_t id_, std::vector<int32_t> tokens_) : id(id_), tokens(std::move(tokens_)) {}
  int32_t id;
  std::vector<int32_t> tokens;
  std::vector<uint64_t> hashes;
  int computed = 0;
  int registered = 0;
};

// Admits a sequence the way the scheduler does: attach the cached prefix, then "compute"
// the rest (write content, register full blocks). Returns the positions taken from cache.
int run(PrefixCache& cache, PagedKvStore& kv, Seq& s, uint64_t request_id = 0) {
  cache.extend_hashes(s.tokens, s.hashes);
  const PrefixMatch m = cache.match(s.tokens, s.hashes);
  const int cached = cache.attach(s.id, m, s.tokens, s.hashes, request_id);
  kv.reserve(s.id, static_cast<int>(s.tokens.size()));
  const auto table = kv.block_table(s.id);
  for (size_t b = static_cast<size_t>(cached / kBlock); b < table.size(); ++b) {
    const size_t end = std::min(s.tokens.size(), (b + 1) * kBlock);
    const std::span<const int32_t> prefix(s.tokens.data(), end);
    for (size_t i = 0; i < kv.layout().block_bytes(); ++i) {
      kv.block_data(table[b])[i] = content_byte(prefix, i);
    }
  }
  s.computed = static_cast<int>(s.tokens.size());
  cache.cache_blocks(s.id, s.hashes, s.computed, s.tokens, &s.registered);
  return cached;
}

// Every full block the sequence holds has the content its prefix implies.
void expect_content(PagedKvStore& kv, const Seq& s) {
  const auto table = kv.block_table(s.id);
  for (size_t b = 0; b < s.tokens.size() / kBlock && b < table.size(); ++b) {
    const std::span<const int32_t> prefix(s.tokens.data(), (b + 1) * kBlock);
    for (size_t i = 0; i < kv.layout().block_bytes(); ++i) {
      ASSERT_EQ(kv.block_data(table[b])[i], content_byte(prefix, i))
          << "sequence " << s.id << " block " << b << " byte " << i;
    }
  }
}

std::vector<int32_t> iota_tokens(int n, int32_t first = 1) {
  std::vector<int32_t> t(n);
  std::iota(t.begin(), t.end(), first);
  return t;
}

TEST(BlockHash, ChainsAndKeysSeparatePrefixes) {
  const std::vector<int32_t> a = {1, 2, 3, 4, 5, 6, 7, 8};
  std::vector<uint64_t> h1, h2, h3;
  extend_block_hashes(a, kBlock, kIdentity, h1);
  ASSERT_EQ(h1.size(), 2u);
  // Same second block after a different first block: a different hash (chaining).
  std::vector<int32_t> b = a;
  b[0] = 9;
  extend_block_hashes(b, kBlock, kIdentity, h2);
  EXPECT_NE(h1[0], h2[0]);
  EXPECT_NE(h1[1], h2[1]);
  // Another model identity never shares.
  extend_block_hashes(a, kBlock, kIdentity + 1, h3);
  EXPECT_NE(h1[0], h3[0]);
  // Incremental extension equals hashing at once; partial blocks are not hashed.
  std::vector<uint64_t> inc;
  extend_block_hashes(std::span<const int32_t>(a).first(5), kBlock, kIdentity, inc);
  EXPECT_EQ(inc.size(), 1u);
  extend_block_hashes(a, kBlock, kIdentity, inc);
  EXPECT_EQ(inc, h1);
}

TEST(BlockHash, EveryTokenOfABlockChangesItsHash) {
  const std::vector<int32_t> a = iota_tokens(16);
  std::vector<uint64_t> ha;
  extend_block_hashes(a, 16, kIdentity, ha);
  for (size_t i = 0; i < a.size(); ++i) {
    std::vector<int32_t> b = a;
    b[i] += 1000;
    std::vector<uint64_t> hb;
    extend_block_hashes(b, 16, kIdentity, hb);
    EXPECT_NE(ha[0], hb[0]) << "token " << i << " is not hashed";
  }
}

// A 64-bit hash can collide. Force it: give a prompt the hashes of a cached prompt it
// differs from. match() re-checks tokens and parents, so it reuses only blocks whose tokens
// (and whole prefix) equal the prompt's, whatever the hashes say.
TEST(PrefixCache, AHashCollisionNeverReusesOtherTokens) {
  PagedKvStore kv(tiny_layout(), 16, 256);
  PrefixCache cache(kv, kIdentity, nullptr);
  Seq a{1, iota_tokens(20)};
  run(cache, kv, a);
  kv.release(a.id);

  // Differs at position 15, the last token of block 3: blocks 0-2 are a true hit.
  std::vector<int32_t> b = iota_tokens(20);
  b[15] = 99;
  EXPECT_EQ(cache.match(b, a.hashes).blocks(), 3);
  // Differs at position 0: nothing is reused, though every hash "hits".
  std::vector<int32_t> c = iota_tokens(20);
  c[0] = 99;
  EXPECT_EQ(cache.match(c, a.hashes).blocks(), 0);
  // Equal tokens, wrong prefix: a's second block is 5 6 7 8; a prompt starting with those
  // tokens whose first hash collides with that block's is not at position 4, so its
  // parent differs and nothing is reused.
  const std::vector<int32_t> d = {5, 6, 7, 8, 9, 10, 11, 12, 13};
  const std::vector<uint64_t> d_hashes = {a.hashes[1], a.hashes[2]};
  EXPECT_EQ(cache.match(d, d_hashes).blocks(), 0);

  // Through attach, as the scheduler admits it: the prompt holds only correct K/V.
  Seq e{2, b};
  e.hashes = a.hashes;
  e.hashes.resize(4);
  const PrefixMatch m = cache.match(e.tokens, e.hashes);
  const int held = cache.attach(e.id, m, e.tokens, e.hashes, 0);
  EXPECT_LE(held, 15);  // never position 15, where the prompts differ
  expect_content(kv, Seq{2, std::vector<int32_t>(b.begin(), b.begin() + held / kBlock * kBlock)});
  kv.release(e.id);
  kv.check_no_leaks();
}

TEST(PrefixCache, ReusesTheLongestCachedRunButNeverTheLastToken) {
  PagedKvStore kv(tiny_layout(), 16, 256);
  PrefixCache cache(kv, kIdentity, nullptr);
  Seq a{1, iota_tokens(10)};
  EXPECT_EQ(run(cache, kv, a), 0);
  kv.release(a.id);
  EXPECT_EQ(kv.pool().cached_free_blocks(), 2);  // two full blocks stay cached

  Seq b{2, iota_tokens(12)};  // the same 10 tokens and more
  EXPECT_EQ(run(cache, kv, b), 8);
  expect_content(kv, b);
  // Exactly the cached prompt again: the last block is not reused whole, so the final
  // token is computed (its logits start generation); its first 3 tokens are copied.
  Seq c{3, iota_tokens(8)};
  EXPECT_EQ(run(cache, kv, c), 7);
  expect_content(kv, c);
  const PrefixCacheStats st = cache.stats();
  EXPECT_EQ(st.queries, 3u);
  EXPECT_EQ(st.hits, 2u);
  EXPECT_EQ(st.prompt_tokens, 30u);
  EXPECT_EQ(st.ram_hit_tokens, 15u);
  EXPECT_EQ(st.computed_tokens, 15u);
  kv.release(b.id);
  kv.release(c.id);
  kv.check_no_leaks();
}

TEST(PrefixCache, SharedBlocksAreFreedOnlyWhenTheLastUserIsDone) {
  PagedKvStore kv(tiny_layout(), 16, 256);
  PrefixCache cache(kv, kIdentity, nullptr);
  Seq a{1, iota_tokens(9)}, b{2, iota_tokens(9)}, c{3, iota_tokens(9)};
  run(cache, kv, a);
  EXPECT_EQ(run(cache, kv, b), 8);
  EXPECT_EQ(run(cache, kv, c), 8);
  const int32_t first = kv.block_table(a.id)[0];
  EXPECT_EQ(kv.block_table(b.id)[0], first);
  EXPECT_EQ(kv.pool().ref_count(first), 3);
  kv.release(a.id);
  kv.release(b.id);
  EXPECT_EQ(kv.pool().ref_count(first), 1);
  // Pressure: allocate everything that is free. The block c still uses must survive.
  std::vector<int32_t> grabbed;
  for (int32_t blk; (blk = kv.pool().try_allocate()) >= 0;) grabbed.push_back(blk);
  EXPECT_EQ(kv.pool().ref_count(first), 1);
  expect_content(kv, c);
  for (int32_t blk : grabbed) kv.pool().free(blk);
  kv.release(c.id);
  EXPECT_EQ(kv.pool().ref_count(first), 0);
  kv.check_no_leaks();
}

TEST(PrefixCache, EvictsLeastRecentlyUsedAndForgetsEvictedHashes) {
  PagedKvStore kv(tiny_layout(), 4, 256);
  PrefixCache cache(kv, kIdentity, nullptr);
  Seq a{1, iota_tokens(5, 100)};
  Seq b{2, iota_tokens(5, 200)};
  run(cache, kv, a);
  kv.release(a.id);
  run(cache, kv, b);
  kv.release(b.id);
  // Two cached blocks; a new 12-token sequence needs 3 blocks: a's (older) is evicted.
  Seq big{3, iota_tokens(12, 300)};
  run(cache, kv, big);
  kv.release(big.id);
  EXPECT_GE(cache.stats().evicted_blocks, 1u);
  Seq a2{4, iota_tokens(5, 100)};
  EXPECT_EQ(run(cache, kv, a2), 0);  // evicted: recomputed, never stale content
  expect_content(kv, a2);
  kv.release(a2.id);
  kv.check_no_leaks();
}

TEST(PrefixCache, ExplainsAOneTokenDifferenceInTheFirstBlock) {
  PagedKvStore kv(tiny_layout(), 16, 256);
  PrefixCache cache(kv, kIdentity, nullptr);
  Seq a{1, iota_tokens(24)};
  run(cache, kv, a, 7);
  kv.release(a.id);
  EXPECT_TRUE(cache.take_divergences().empty());  // a new prompt is not a near miss
  Seq b{2, iota_tokens(24)};
  b.tokens[2] = 99;  // inside the first block: nothing can be reused
  EXPECT_EQ(run(cache, kv, b, 8), 0);
  const auto misses = cache.take_divergences();
  ASSERT_EQ(misses.size(), 1u);
  const PrefixDivergence& d = misses[0];
  EXPECT_EQ(d.request_id, 8u);
  EXPECT_EQ(d.reused_tokens, 0);
  EXPECT_EQ(d.matched_tokens, 2);
  EXPECT_EQ(d.common, (std::vector<int32_t>{1, 2}));
  ASSERT_FALSE(d.prompt_after.empty());
  EXPECT_EQ(d.prompt_after[0], 99);
  // The cached side continues down the cached chain: 3 4 | 5 6 7 8 | ...
  ASSERT_GE(d.cached_after.size(), 6u);
  EXPECT_EQ(d.cached_after[0], 3);
  EXPECT_EQ(d.cached_after[5], 8);
  // A difference in the second block: the first is reused whole and the second's two
  // leading tokens copied; the record says where.
  Seq c{3, iota_tokens(24)};
  c.tokens[6] = 98;
  EXPECT_EQ(run(cache, kv, c, 9), 6);
  const auto second = cache.take_divergences();
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].reused_tokens, 6);
  EXPECT_EQ(second[0].matched_tokens, 6);
  EXPECT_EQ(cache.stats().miss_records, 2u);
  kv.release(b.id);
  kv.release(c.id);
  kv.check_no_leaks();
}

// The near misses the first version did not record: a value of another length at the very
// start (no token shared, a UUID in front of a system prompt) and a difference exactly on a
// block boundary. Both are recorded, with the two differing values.
TEST(PrefixCache, ExplainsDifferencesAtTheStartAndOnABlockBoundary) {
  PagedKvStore kv(tiny_layout(), 32, 256);
  PrefixCache cache(kv, kIdentity, nullptr);
  // A 3-token "id", then 24 tokens of shared text.
  std::vector<int32_t> text = iota_tokens(24, 100);
  std::vector<int32_t> first = {7, 8, 9};
  first.insert(first.end(), text.begin(), text.end());
  Seq a{1, first};
  run(cache, kv, a, 1);
  kv.release(a.id);
  std::vector<int32_t> second = {50, 51, 52, 53, 54};  // another id, two tokens longer
  second.insert(second.end(), text.begin(), text.end());
  Seq b{2, second};
  EXPECT_EQ(run(cache, kv, b, 2), 0);
  auto misses = cache.take_divergences();
  ASSERT_EQ(misses.size(), 1u);
  EXPECT_EQ(misses[0].matched_tokens, 0);
  EXPECT_EQ(misses[0].prompt_differs, 5);
  EXPECT_EQ(misses[0].cached_differs, 3);
  ASSERT_GE(misses[0].cached_after.size(), 3u);
  EXPECT_EQ(misses[0].cached_after[0], 7);
  kv.release(b.id);

  // On a boundary: 8 shared tokens (two whole blocks), then a 1-token value.
  Seq c{3, iota_tokens(24, 300)};
  run(cache, kv, c, 3);
  kv.release(c.id);
  Seq d{4, iota_tokens(24, 300)};
  d.tokens[8] = 999;
  EXPECT_EQ(run(cache, kv, d, 4), 8);
  misses = cache.take_divergences();
  ASSERT_EQ(misses.size(), 1u);
  EXPECT_EQ(misses[0].reused_tokens, 8);
  EXPECT_EQ(misses[0].matched_tokens, 8);
  EXPECT_EQ(misses[0].prompt_differs, 1);
  EXPECT_EQ(misses[0].cached_differs, 1);
  kv.release(d.id);
  // A prompt that goes on differently after a shared part is no near miss.
  Seq e{5, iota_tokens(8, 300)};
  const std::vector<int32_t> other = iota_tokens(16, 700);
  e.tokens.insert(e.tokens.end(), other.begin(), other.end());
  EXPECT_EQ(run(cache, kv, e, 5), 8);
  EXPECT_TRUE(cache.take_divergences().empty());
  kv.release(e.id);
  kv.check_no_leaks();
}

// The shared part of a prompt rarely ends on a block boundary: the leading tokens it shares
// with the next cached block are copied (every K and V slot of them, in every layer and
// head) into a new block of its own, and nothing else of that block is taken.
TEST(PrefixCache, CopiesTheSharedLeadingTokensOfTheNextCachedBlock) {
  PagedKvStore kv(tiny_layout(), 16, 256);
  PrefixCache cache(kv, kIdentity, nullptr);
  Seq a{1, iota_tokens(12)};
  run(cache, kv, a);
  const int32_t cached_second = kv.block_table(a.id)[1];
  kv.release(a.id);

  Seq b{2, iota_tokens(12)};
  b.tokens[6] = 98;  // shares 1 2 3 4 | 5 6 with a
  cache.extend_hashes(b.tokens, b.hashes);
  const PrefixMatch m = cache.match(b.tokens, b.hashes);
  ASSERT_EQ(m.blocks(), 1);
  EXPECT_EQ(cache.attach(b.id, m, b.tokens, b.hashes, 0), 6);
  EXPECT_EQ(kv.positions(b.id), 6);
  const auto table = kv.block_table(b.id);
  ASSERT_EQ(table.size(), 2u);
  EXPECT_NE(table[1], cached_second);  // a copy: the cached block stays as it was
  EXPECT_EQ(kv.pool().ref_count(cached_second), 0);
  const KvLayout& layout = kv.layout();
  const size_t e = layout.element_bytes();
  const uint8_t* from = kv.block_data(cached_second);
  const uint8_t* to = kv.block_data(table[1]);
  for (int layer = 0; layer < layout.n_layers; ++layer) {
    for (int head = 0; head < layout.n_kv_heads; ++head) {
      for (int slot = 0; slot < 2; ++slot) {
        for (int d = 0; d < layout.head_dim; ++d) {
          const size_t k = layout.offset(layer, false, head) + layout.key_element(slot, d) * e;
          const size_t v = layout.offset(layer, true, head) + layout.value_element(slot, d) * e;
          ASSERT_EQ(std::memcmp(to + k, from + k, e), 0) << layer << " " << head << " " << slot;
          ASSERT_EQ(std::memcmp(to + v, from + v, e), 0) << layer << " " << head << " " << slot;
        }
      }
    }
  }
  const PrefixCacheStats st = cache.stats();
  EXPECT_EQ(st.ram_hit_tokens, 6u);
  kv.release(b.id);
  kv.check_no_leaks();
}

class OffloadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("rapide_offload_test_" +
            std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // A file tier in this test's directory, 1 MiB.
  OffloadTierOptions file_tier() const {
    OffloadTierOptions o;
    o.dir = dir_.string();
    o.disk_bytes = 1 << 20;
    return o;
  }
  // The tier a PrefixCache over `kv` takes, configured by `o`.
  static std::unique_ptr<OffloadTier> tier(const OffloadTierOptions& o, const PagedKvStore& kv) {
    return std::make_unique<OffloadTier>(o, kv.layout(), kIdentity);
  }

  // Caches `a`, then pushes all of its blocks out of a 4-block pool with other content.
  static void cache_then_evict(PrefixCache& cache, PagedKvStore& kv, Seq& a) {
    run(cache, kv, a);
    kv.release(a.id);
    for (int32_t i = 0; i < 3; ++i) {
      Seq other{100 + i, iota_tokens(13, 1000 + 100 * i)};
      run(cache, kv, other);
      kv.release(other.id);
    }
  }
  std::filesystem::path dir_;
};

TEST_F(OffloadTest, RoundTripRamToTierToRamIsBitExactWithEveryCodec) {
  for (OffloadCodec codec : {OffloadCodec::kNone, OffloadCodec::kLz4, OffloadCodec::kZstd}) {
    SCOPED_TRACE(offload_codec_name(codec));
    PagedKvStore kv(tiny_layout(), 4, 256);
    OffloadTierOptions o;
    o.ram_bytes = 1 << 20;
    o.codec = codec;
    PrefixCache cache(kv, kIdentity, tier(o, kv));
    Seq a{1, iota_tokens(13)};
    cache_then_evict(cache, kv, a);
    EXPECT_GE(cache.stats().offload.stored_blocks, 3u);
    Seq again{2, iota_tokens(13)};
    EXPECT_EQ(run(cache, kv, again), 12);
    expect_content(kv, again);
    const PrefixCacheStats st = cache.stats();
    EXPECT_EQ(st.tier_hit_tokens, 12u);
    EXPECT_EQ(st.offload.loaded_blocks, 3u);
    EXPECT_EQ(st.offload.bytes_in, 3 * kv.layout().block_bytes());
    EXPECT_GE(st.offload.bytes_out, st.offload.bytes_in);
    kv.release(again.id);
    kv.check_no_leaks();
  }
}

TEST_F(OffloadTest, FilesRoundTripAndSurviveARestart) {
  const OffloadTierOptions o = file_tier();
  {
    PagedKvStore kv(tiny_layout(), 4, 256);
    PrefixCache cache(kv, kIdentity, tier(o, kv));
    Seq a{1, iota_tokens(13)};
    cache_then_evict(cache, kv, a);
    EXPECT_GT(cache.stats().offload.disk_blocks, 0u);
    Seq again{2, iota_tokens(13)};
    EXPECT_EQ(run(cache, kv, again), 12);
    expect_content(kv, again);
    kv.release(again.id);
    kv.check_no_leaks();
  }
  // A new process on the same directory finds the blocks; another model ignores them.
  PagedKvStore kv(tiny_layout(), 4, 256);
  PrefixCache cache(kv, kIdentity, tier(o, kv));
  EXPECT_GT(cache.stats().cached_blocks, 0u);
  Seq again{3, iota_tokens(13)};
  EXPECT_EQ(run(cache, kv, again), 12);
  expect_content(kv, again);
  kv.release(again.id);
  kv.check_no_leaks();

  PagedKvStore kv2(tiny_layout(), 4, 256);
  OffloadTier foreign(o, kv2.layout(), kIdentity + 1);
  EXPECT_GT(foreign.stats().foreign_blocks, 0u);
  EXPECT_EQ(foreign.size(), 0u);
}

TEST_F(OffloadTest, CorruptFilesAreDetectedCountedAndRecomputed) {
  const OffloadTierOptions o = file_tier();
  PagedKvStore kv(tiny_layout(), 4, 256);
  PrefixCache cache(kv, kIdentity, tier(o, kv));
  Seq a{1, iota_tokens(13)};
  cache_then_evict(cache, kv, a);
  // Flip one payload byte in the file of a's second block.
  std::vector<uint64_t> hashes;
  extend_block_hashes(a.tokens, kBlock, kIdentity, hashes);
  const auto path = dir_ / block_file_name(kIdentity, hashes[1]);
  ASSERT_TRUE(std::filesystem::exists(path));
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-10, std::ios::end);
    char c;
    f.read(&c, 1);
    f.seekp(-10, std::ios::end);
    c = static_cast<char>(c ^ 0x40);
    f.write(&c, 1);
  }
  Seq again{2, iota_tokens(13)};
  EXPECT_EQ(run(cache, kv, again), 4);  // the first block loads; the corrupt one stops reuse
  expect_content(kv, again);            // and what was recomputed is right
  EXPECT_EQ(cache.stats().offload.corrupt_blocks, 1u);
  EXPECT_FALSE(std::filesystem::exists(path));  // never offered again
  kv.release(again.id);
  kv.check_no_leaks();
}

// A file whose header is intact (checksum recomputed) but claims a 90 GB payload, made to
// pass the size check as a sparse file: it used to reach `std::vector(90 GB)` and throw
// bad_alloc on the engine thread. The stored size is capped at the codec's bound first.
TEST_F(OffloadTest, AForgedHugeStoredSizeIsCorruptNotAnAllocation) {
  const OffloadTierOptions o = file_tier();
  PagedKvStore kv(tiny_layout(), 4, 256);
  PrefixCache cache(kv, kIdentity, tier(o, kv));
  Seq a{1, iota_tokens(13)};
  cache_then_evict(cache, kv, a);
  std::vector<uint64_t> hashes;
  extend_block_hashes(a.tokens, kBlock, kIdentity, hashes);
  const auto path = dir_ / block_file_name(kIdentity, hashes[1]);
  ASSERT_TRUE(std::filesystem::exists(path));
  // FileHeader (offload_file.cpp): n_tokens at 44, stored_bytes at 72, header_checksum at
  // 96 over the 96 bytes before it and the token ids after the 104-byte header.
  std::vector<char> bytes(std::filesystem::file_size(path));
  std::ifstream(path, std::ios::binary)
      .read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  uint32_t n_tokens = 0;
  std::memcpy(&n_tokens, bytes.data() + 44, sizeof(n_tokens));
  const uint64_t forged = 90ull << 30;
  std::memcpy(bytes.data() + 72, &forged, sizeof(forged));
  XXH3_state_t* state = XXH3_createState();
  XXH3_64bits_reset(state);
  XXH3_64bits_update(state, bytes.data(), 96);
  XXH3_64bits_update(state, bytes.data() + 104, n_tokens * sizeof(int32_t));
  const uint64_t sum = XXH3_64bits_digest(state);
  XXH3_freeState(state);
  std::memcpy(bytes.data() + 96, &sum, sizeof(sum));
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(bytes.data(), 104 + n_tokens * sizeof(int32_t));
  std::filesystem::resize_file(path, 104 + n_tokens * sizeof(int32_t) + forged);  // sparse

  Seq again{2, iota_tokens(13)};
  EXPECT_EQ(run(cache, kv, again), 4);  // the first block loads; the forged one stops reuse
  expect_content(kv, again);
  EXPECT_EQ(cache.stats().offload.corrupt_blocks, 1u);
  kv.release(again.id);
  kv.check_no_leaks();
}

// A FIFO in place of a block file: open() of it used to block the engine forever.
TEST_F(OffloadTest, AFifoInPlaceOfABlockIsCorruptNotAHang) {
  const OffloadTierOptions o = file_tier();
  PagedKvStore kv(tiny_layout(), 4, 256);
  PrefixCache cache(kv, kIdentity, tier(o, kv));
  Seq a{1, iota_tokens(13)};
  cache_then_evict(cache, kv, a);
  std::vector<uint64_t> hashes;
  extend_block_hashes(a.tokens, kBlock, kIdentity, hashes);
  const auto path = dir_ / block_file_name(kIdentity, hashes[1]);
  ASSERT_TRUE(std::filesystem::remove(path));
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);

  Seq again{2, iota_tokens(13)};
  EXPECT_EQ(run(cache, kv, again), 4);
  expect_content(kv, again);
  EXPECT_EQ(cache.stats().offload.corrupt_blocks, 1u);
  kv.release(again.id);
  kv.check_no_leaks();
}

}  // namespace
}  // namespace rapide
