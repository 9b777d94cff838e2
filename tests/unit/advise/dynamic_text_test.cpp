#include <gtest/gtest.h>

#include "advise/dynamic_text.h"

namespace rapide::advise {
namespace {

TEST(DynamicText, ClassifiesTheUsualCulprits) {
  EXPECT_EQ(classify_difference("Now: 2026-11-29T10:04:", "11Z. You are", "12Z. You are"),
            DynamicKind::kTimestamp);
  EXPECT_EQ(classify_difference("request ", "3f2a9c1e-77b0-4c1d-9a4e-0c7d1b2e3f40 hi",
                                "a1b2c3d4-0000-4c1d-9a4e-0c7d1b2e3f40 hi"),
            DynamicKind::kIdentifier);
  EXPECT_EQ(classify_difference("turn #", "17 of", "18 of"), DynamicKind::kNumber);
  EXPECT_EQ(classify_difference("{\"", "name\": 1, \"id\": 2}", "id\": 2, \"name\": 1}"),
            DynamicKind::kKeyOrder);
  EXPECT_EQ(classify_difference("Hello", "  world", " world"), DynamicKind::kWhitespace);
  EXPECT_EQ(classify_difference("Dear ", "Alice, here", "Bob, here"), DynamicKind::kText);
}

TEST(DynamicText, DifferenceTokenSpansTheWholeValue) {
  EXPECT_EQ(difference_token("at 2026-11-29T10:0", "4:11 the"), "2026-11-29T10:04:11");
  EXPECT_EQ(difference_token("Dear ", "Alice, here"), "Alice,");
}

}  // namespace
}  // namespace rapide::advise
