// LargeBuffer (base/huge_pages.h): huge-page mappings for buffers of a huge page or more,
// the heap below that; both 64-byte aligned and fully writable.
#include "base/huge_pages.h"

#include <gtest/gtest.h>

#include <cstring>

namespace rapide {
namespace {

TEST(LargeBuffer, SmallBuffersComeFromTheHeapLargeOnesFromHugePages) {
  LargeBuffer small;
  small.resize(4096);
  ASSERT_NE(small.data(), nullptr);
  EXPECT_FALSE(small.on_huge_pages());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(small.data()) % 64, 0u);

  LargeBuffer large;
  const size_t bytes = 3 * kHugePage + 12345;  // not a whole number of huge pages
  large.resize(bytes);
  ASSERT_NE(large.data(), nullptr);
  EXPECT_EQ(large.size(), bytes);
  EXPECT_TRUE(large.on_huge_pages());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(large.data()) % kHugePage, 0u);
  std::memset(large.data(), 0x5a, bytes);
  EXPECT_EQ(large.data()[0], 0x5a);
  EXPECT_EQ(large.data()[bytes - 1], 0x5a);
}

TEST(LargeBuffer, ResizeReplacesTheMemory) {
  LargeBuffer b;
  b.resize(kHugePage);
  EXPECT_TRUE(b.on_huge_pages());
  std::memset(b.data(), 1, b.size());
  b.resize(100);  // down to the heap
  EXPECT_FALSE(b.on_huge_pages());
  EXPECT_EQ(b.size(), 100u);
  std::memset(b.data(), 2, b.size());
  b.resize(0);
  EXPECT_EQ(b.data(), nullptr);
  EXPECT_EQ(b.size(), 0u);
}

}  // namespace
}  // namespace rapide
