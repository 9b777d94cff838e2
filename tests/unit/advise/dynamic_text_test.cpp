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

TEST(DynamicText, WidenedValuesAreWholeWordsAndIds) {
  DifferingValues v = widen_values("Now: 2026-11-29T10:04:2", "5Z\nYou", 1, "4Z\nYou", 1);
  EXPECT_EQ(v.a, "2026-11-29T10:04:25Z");
  EXPECT_EQ(v.b, "2026-11-29T10:04:24Z");
  v = widen_values("Customer: ", "Alice. Rule", 5, "Bob. Rule", 3);
  EXPECT_EQ(v.a, "Alice");
  EXPECT_EQ(v.b, "Bob");
  v = widen_values("Be ", " brief", 1, "brief", 0);  // whitespace stays whitespace
  EXPECT_EQ(v.a, " ");
  EXPECT_EQ(v.b, "");
  EXPECT_EQ(show_value("a\r\nb\xC2\xA0"
                       "c"),
            "a\\r\\nb\\u00a0c");
  EXPECT_EQ(show_value(std::string(100, 'x'), 10), "xxxxxxxxxx...");
}

}  // namespace
}  // namespace rapide::advise
