// compare_after_divergence: what counts as a near miss after the first differing token.
#include "kv/near_miss.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

namespace rapide {
namespace {

std::vector<int32_t> text(int n, int32_t first) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), first);
  return t;
}

std::vector<int32_t> join(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(NearMiss, ValuesOfDifferentLengthsRealignAndAreMeasured) {
  const std::vector<int32_t> rest = text(40, 1000);
  const NearMiss m = compare_after_divergence(join(text(7, 1), rest), join(text(4, 50), rest));
  EXPECT_TRUE(m.near);
  EXPECT_TRUE(m.realigned);
  EXPECT_EQ(m.prompt_differs, 7);
  EXPECT_EQ(m.cached_differs, 4);
  // A value as long as the realignment window allows.
  const NearMiss long_value =
      compare_after_divergence(join(text(60, 1), rest), join(text(60, 100), rest));
  EXPECT_TRUE(long_value.near);
  EXPECT_EQ(long_value.prompt_differs, 60);
}

TEST(NearMiss, ReorderedContentIsANearMissByContent) {
  // Three sections in another order: nothing realigns within reach, the content is the same.
  const auto a = text(80, 100), b = text(80, 200), c = text(80, 300);
  const NearMiss m = compare_after_divergence(join(join(b, a), c), join(join(a, b), c));
  EXPECT_TRUE(m.near);
  EXPECT_FALSE(m.realigned);
  EXPECT_EQ(m.prompt_differs, -1);
}

TEST(NearMiss, AnotherTextOrADifferenceAtTheEndIsNot) {
  EXPECT_FALSE(compare_after_divergence(text(50, 1), text(50, 500)).near);
  // The prompt ends with its value: nothing after it could have been reused.
  EXPECT_FALSE(compare_after_divergence(std::vector<int32_t>{7}, text(30, 1)).near);
  // A short common tail (a closing word) is chance, not a realignment.
  EXPECT_FALSE(
      compare_after_divergence(join(text(5, 1), {900, 901}), join(text(5, 50), {900, 901, 902}))
          .near);
  // Nor is a word of a few tokens at the prompt's end (the cached side goes on with the
  // earlier request's output, which may repeat it).
  EXPECT_FALSE(compare_after_divergence(join(text(9, 1), text(5, 900)),
                                        join(join(text(6, 50), text(5, 900)), text(20, 3000)))
                   .near);
  // A common phrase inside two different texts does not realign them.
  const auto phrase = text(8, 5000);
  EXPECT_FALSE(compare_after_divergence(join(join(text(3, 1), phrase), text(60, 100)),
                                        join(join(text(3, 40), phrase), text(60, 600)))
                   .near);
}

}  // namespace
}  // namespace rapide
