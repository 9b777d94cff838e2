#include <gtest/gtest.h>

#include "tiny_vocab.h"
#include "tokenizer/tokenizer.h"

namespace rapide {
namespace {

using testing::byte_id;
using testing::first_piece_id;
using testing::kSpace;
using testing::spm_vocab;
using Ids = std::vector<int32_t>;

std::vector<std::string> stream(const Tokenizer& tok, const Ids& ids) {
  StreamingDetokenizer detok(tok);
  std::vector<std::string> out;
  for (const int32_t id : ids) out.push_back(detok.push(id));
  out.push_back(detok.flush());
  return out;
}

TEST(StreamingDetokenizer, HoldsByteFallbackUntilTheCharacterCompletes) {
  auto tok = Tokenizer::create(spm_vocab({{kSpace, 0}, {"a", 0}, {std::string(kSpace) + "a", -1}}));
  const int32_t p = first_piece_id();
  const Ids ids = tok->encode("a \xF0\x9F\x98\x80\xE4\xBD\xA0!", true);
  // BOS, ▁a, ▁, then the emoji's four byte tokens, the CJK character's three, and '!'.
  ASSERT_EQ(ids, (Ids{1, p + 2, p, byte_id(0xF0), byte_id(0x9F), byte_id(0x98), byte_id(0x80),
                      byte_id(0xE4), byte_id(0xBD), byte_id(0xA0), byte_id('!')}));
  EXPECT_EQ(stream(*tok, ids),
            (std::vector<std::string>{"", "a", " ", "", "", "", "\xF0\x9F\x98\x80", "", "",
                                      "\xE4\xBD\xA0", "!", ""}));
}

TEST(StreamingDetokenizer, ConcatenationEqualsDecode) {
  auto tok = Tokenizer::create(spm_vocab({{kSpace, 0}, {"a", 0}, {std::string(kSpace) + "a", -1}}));
  const std::string text = "a\xC3\xA9 a \xE4\xBD\xA0\xF0\x9F\x98\x80 a";
  const Ids ids = tok->encode(text, true);
  std::string joined;
  for (const auto& piece : stream(*tok, ids)) joined += piece;
  EXPECT_EQ(joined, text);
  EXPECT_EQ(joined, tok->decode(ids));
}

TEST(StreamingDetokenizer, FlushReplacesDanglingBytes) {
  auto tok = Tokenizer::create(spm_vocab({{"a", 0}}));
  StreamingDetokenizer detok(*tok);
  EXPECT_EQ(detok.push(byte_id(0xF0)), "");
  EXPECT_EQ(detok.push(byte_id(0x9F)), "");
  EXPECT_EQ(detok.flush(), "\xEF\xBF\xBD");
  EXPECT_EQ(detok.flush(), "");
  EXPECT_EQ(detok.push(byte_id('x')), "x");
}

TEST(StreamingDetokenizer, InvalidBytesAreReplacedAtOnce) {
  auto tok = Tokenizer::create(spm_vocab({{"a", 0}}));
  StreamingDetokenizer detok(*tok);
  EXPECT_EQ(detok.push(byte_id(0x80)), "\xEF\xBF\xBD");  // a continuation byte with no lead
  EXPECT_EQ(detok.push(byte_id(0xE4)), "");
  EXPECT_EQ(detok.push(byte_id('x')),
            "\xEF\xBF\xBD"
            "x");                                        // the lead byte will never complete
  EXPECT_EQ(detok.push(byte_id(0xC0)), "\xEF\xBF\xBD");  // never valid in UTF-8
}

TEST(StreamingDetokenizer, ByteLevelTokensThatSplitCharacters) {
  // Byte-level vocabularies hold many tokens that are parts of characters: "你" (E4 BD A0)
  // can come out as the token for E4 followed by a token for BD A0.
  TokenizerData d = testing::byte_level_vocab({});
  d.tokens.push_back(byte_level::byte_to_symbol(0xBD) + byte_level::byte_to_symbol(0xA0));
  d.types.push_back(TokenType::kNormal);
  const int32_t tail = static_cast<int32_t>(d.tokens.size() - 1);
  auto tok = Tokenizer::create(d);
  StreamingDetokenizer detok(*tok);
  EXPECT_EQ(detok.push(' '), " ");  // byte-level vocabularies never strip a leading space
  EXPECT_EQ(detok.push(0xE4), "");
  EXPECT_EQ(detok.push(tail), "\xE4\xBD\xA0");
  EXPECT_EQ(detok.push(0xF0), "");
  EXPECT_EQ(detok.push(0x9F), "");
  EXPECT_EQ(detok.flush(), "\xEF\xBF\xBD");
}

TEST(StreamingDetokenizer, KeepsTheLeadingSpaceWhenAsked) {
  auto tok = Tokenizer::create(spm_vocab({{kSpace, 0}, {"a", 0}, {std::string(kSpace) + "a", -1}}));
  StreamingDetokenizer detok(*tok, /*skip_leading_space=*/false);
  const int32_t p = first_piece_id();
  EXPECT_EQ(detok.push(1), "");
  EXPECT_EQ(detok.push(p + 2), " a");
}

}  // namespace
}  // namespace rapide
