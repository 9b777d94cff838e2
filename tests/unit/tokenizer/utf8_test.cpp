#include "tokenizer/utf8.h"

#include <gtest/gtest.h>

#include "tokenizer/byte_level_codec.h"

namespace rapide {
namespace {

using utf8::CharStatus;

TEST(Utf8, CheckChar) {
  EXPECT_EQ(utf8::check_char("a").status, CharStatus::kComplete);
  EXPECT_EQ(utf8::check_char("\xC3\xA9").length, 2u);
  EXPECT_EQ(utf8::check_char("\xF0\x9F\x98\x80").status, CharStatus::kComplete);
  EXPECT_EQ(utf8::check_char("\xF0\x9F").status, CharStatus::kIncomplete);
  EXPECT_EQ(utf8::check_char("\x80").status, CharStatus::kInvalid);
  EXPECT_EQ(utf8::check_char("\xC0\x80").status, CharStatus::kInvalid);          // overlong
  EXPECT_EQ(utf8::check_char("\xED\xA0\x80").status, CharStatus::kInvalid);      // surrogate
  EXPECT_EQ(utf8::check_char("\xF4\x90\x80\x80").status, CharStatus::kInvalid);  // > U+10FFFF
  const auto broken = utf8::check_char("\xE4\xBDx");
  EXPECT_EQ(broken.status, CharStatus::kInvalid);
  EXPECT_EQ(broken.length, 2u);  // the maximal valid prefix becomes one U+FFFD
}

TEST(ByteLevelCodec, MatchesGpt2Table) {
  EXPECT_EQ(byte_level::byte_to_symbol(' '), "\xC4\xA0");   // Ġ
  EXPECT_EQ(byte_level::byte_to_symbol('\n'), "\xC4\x8A");  // Ċ
  EXPECT_EQ(byte_level::byte_to_symbol('A'), "A");
  EXPECT_EQ(byte_level::byte_to_symbol(0xAD), "\xC5\x83");  // the last remapped byte: U+0143
  std::string all, symbols;
  for (int b = 0; b < 256; ++b) {
    all.push_back(static_cast<char>(b));
    symbols += byte_level::byte_to_symbol(static_cast<uint8_t>(b));
  }
  EXPECT_EQ(byte_level::symbols_to_bytes(symbols), all);
}

}  // namespace
}  // namespace rapide
