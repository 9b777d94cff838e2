// --kv-type: how many positions one KV budget holds per cache type (issue 16: q8_0 about
// twice f16, q4_0 about 3.5x), the byte layouts behind it, and the head dimensions each
// quantized type refuses.
#include <gtest/gtest.h>

#include <cstdio>

#include "base/error.h"
#include "kernels/kv_rows.h"
#include "kv/memory_budget.h"
#include "kv/paged_kv_store.h"

namespace rapide {
namespace {

constexpr int kMaxContext = 2048;

// Sequences of the full 2k context that fit a 256 MiB budget, for a 100M-class Llama
// (12 layers, 4 KV heads of 64, 16-position blocks).
int full_context_sequences(KvType type) {
  const KvLayout layout{12, 4, 64, 16, type};
  auto kv = PagedKvStore::with_budget(layout, parse_memory_budget("256MiB"), kMaxContext);
  int n = 0;
  while (kv->try_reserve(n, kMaxContext)) ++n;
  std::printf("[kv capacity] %-5s %6s per block: %d sequences of %d positions in 256 MiB\n",
              kv_type_name(type), format_bytes(layout.block_bytes()).c_str(), n, kMaxContext);
  return n;
}

TEST(KvTypeCapacity, QuantizedTypesHoldTheirCompressionRatioMorePositions) {
  const int f16 = full_context_sequences(KvType::kF16);
  const int q8 = full_context_sequences(KvType::kQ8_0);
  const int q4 = full_context_sequences(KvType::kQ4_0);
  ASSERT_GT(f16, 0);
  // Per 32 values: f16 64 bytes, q8_0 32 codes + a 2-byte scale, q4_0 16 + 2. Whole
  // sequences only, so allow one less than the exact ratio.
  EXPECT_GE(q8, f16 * 64 / 34 - 1);
  EXPECT_GE(q4, f16 * 64 / 18 - 1);
  EXPECT_GE(q8, 1.85 * f16);
  EXPECT_GE(q4, 3.5 * f16);
}

TEST(KvTypeCapacity, PartBytesFollowTheBlockFormats) {
  // head_dim 64: two 32-value groups per position.
  EXPECT_EQ((KvLayout{1, 1, 64, 16, KvType::kQ8_0}.part_bytes()), 16u * (64 + 2 * 2));
  EXPECT_EQ((KvLayout{1, 1, 64, 16, KvType::kQ4_0}.part_bytes()), 16u * (32 + 2 * 2));
  // head_dim 16 (TinyStories-656K): one group of 16 values per position.
  EXPECT_EQ((KvLayout{1, 1, 16, 16, KvType::kQ8_0}.part_bytes()), 16u * (16 + 2));
  // head_dim 80: five groups of 16.
  EXPECT_EQ((KvLayout{1, 1, 80, 16, KvType::kQ4_0}.part_bytes()), 16u * (40 + 5 * 2));
  EXPECT_EQ((KvLayout{2, 3, 64, 16, KvType::kQ8_0}.block_bytes()), 2u * 2 * 3 * 16 * 68);
}

TEST(KvTypeCapacity, UnsupportedHeadDimensionsAreRefusedWithAMessage) {
  try {
    PagedKvStore kv(KvLayout{1, 1, 8, 16, KvType::kQ4_0}, 4, 64);
    FAIL() << "q4_0 with head_dim 8 was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("multiple of 16"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(PagedKvStore(KvLayout{1, 1, 8, 16, KvType::kQ8_0}, 4, 64));
  EXPECT_EQ(parse_kv_type("q4_0"), KvType::kQ4_0);
  EXPECT_THROW(parse_kv_type("q5"), Error);
}

}  // namespace
}  // namespace rapide
