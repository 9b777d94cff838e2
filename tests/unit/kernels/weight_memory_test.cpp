// WeightBuffer: huge-page slabs shared by packed matrices, heap for small ones.
#include "kernels/weight_memory.h"

#include <gtest/gtest.h>

#include <cstring>
#include <utility>
#include <vector>

namespace rapide::matmul {
namespace {

bool aligned64(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 64 == 0;
}

TEST(WeightBuffer, SmallBuffersComeFromTheHeap) {
  WeightBuffer b(1000);
  ASSERT_NE(b.data(), nullptr);
  EXPECT_EQ(b.size(), 1000u);
  EXPECT_FALSE(b.in_slab());
  EXPECT_TRUE(aligned64(b.data()));
  std::memset(b.data(), 7, b.size());
}

TEST(WeightBuffer, LargeBuffersShareSlabsWithoutOverlap) {
  std::vector<WeightBuffer> bufs;
  for (size_t i = 0; i < 12; ++i) bufs.emplace_back((size_t{200} << 10) + i * 4099);
  for (size_t i = 0; i < bufs.size(); ++i) {
    EXPECT_TRUE(bufs[i].in_slab());
    EXPECT_TRUE(aligned64(bufs[i].data()));
    std::memset(bufs[i].data(), static_cast<int>(i), bufs[i].size());
  }
  for (size_t i = 0; i < bufs.size(); ++i) {
    const uint8_t* d = bufs[i].data();
    EXPECT_EQ(d[0], i);
    EXPECT_EQ(d[bufs[i].size() - 1], i);
  }
}

TEST(WeightBuffer, BiggerThanASlab) {
  WeightBuffer b(size_t{40} << 20);
  EXPECT_TRUE(b.in_slab());
  b.data()[0] = 1;
  b.data()[b.size() - 1] = 2;
  EXPECT_EQ(b.data()[b.size() - 1], 2);
}

TEST(WeightBuffer, MovesAndReallocates) {
  WeightBuffer a(size_t{1} << 20);
  uint8_t* p = a.data();
  WeightBuffer b(std::move(a));
  EXPECT_EQ(b.data(), p);
  EXPECT_EQ(a.data(), nullptr);
  EXPECT_EQ(a.size(), 0u);
  WeightBuffer c(100);
  c = std::move(b);
  EXPECT_EQ(c.data(), p);
  EXPECT_TRUE(c.in_slab());
  // Freeing everything and allocating again works (slabs are returned and remade).
  c = WeightBuffer();
  for (int round = 0; round < 3; ++round) {
    WeightBuffer d(size_t{3} << 20);
    std::memset(d.data(), round, d.size());
  }
}

}  // namespace
}  // namespace rapide::matmul
