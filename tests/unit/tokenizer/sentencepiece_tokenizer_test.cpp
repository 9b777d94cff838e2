#include <gtest/gtest.h>

#include "base/error.h"
#include "tiny_vocab.h"
#include "tokenizer/tokenizer.h"

namespace rapide {
namespace {

using testing::byte_id;
using testing::first_piece_id;
using testing::kSpace;
using testing::spm_vocab;
using Ids = std::vector<int32_t>;

const std::string sp(const std::string& s) {
  return kSpace + s;
}

TEST(SentencePieceTokenizer, MergesHighestScoreFirst) {
  // "abc": both "ab" and "bc" are tokens; the higher score wins regardless of position.
  TokenizerData d = spm_vocab({{"a", -5}, {"b", -5}, {"c", -5}, {"ab", -2}, {"bc", -1}});
  d.add_space_prefix = false;
  const int32_t p = first_piece_id();
  EXPECT_EQ(Tokenizer::create(d)->encode("abc", false), (Ids{p + 0, p + 4}));  // a + bc
  d.scores[p + 3] = 0;  // now "ab" outranks "bc"
  EXPECT_EQ(Tokenizer::create(d)->encode("abc", false), (Ids{p + 3, p + 2}));
}

TEST(SentencePieceTokenizer, EqualScoresMergeLeftmostFirst) {
  TokenizerData d = spm_vocab({{"a", 0}, {"b", 0}, {"c", 0}, {"ab", -1}, {"bc", -1}});
  d.add_space_prefix = false;
  const int32_t p = first_piece_id();
  EXPECT_EQ(Tokenizer::create(d)->encode("abc", false), (Ids{p + 3, p + 2}));
}

TEST(SentencePieceTokenizer, MergesChainIntoLongerTokens) {
  TokenizerData d =
      spm_vocab({{kSpace, 0}, {"h", 0}, {"i", 0}, {"hi", -1}, {sp("hi"), -2}, {sp(kSpace), -4}});
  const int32_t p = first_piece_id();
  auto tok = Tokenizer::create(d);
  EXPECT_EQ(tok->encode("hi", false), (Ids{p + 4}));  // ▁ + h + i -> ▁hi
  EXPECT_EQ(tok->encode("hi hi", false), (Ids{p + 4, p + 4}));
  EXPECT_EQ(tok->encode(" hi", false), (Ids{p + 0, p + 4}));  // ▁▁hi: "hi" then "▁hi" wins
  EXPECT_EQ(tok->encode("", false), Ids{});
}

TEST(SentencePieceTokenizer, ByteFallbackForUnknownCharacters) {
  TokenizerData d = spm_vocab({{kSpace, 0}, {"a", 0}});
  const int32_t p = first_piece_id();
  auto tok = Tokenizer::create(d);
  // "é" is C3 A9; the emoji is four bytes.
  EXPECT_EQ(tok->encode("a\xC3\xA9", false), (Ids{p, p + 1, byte_id(0xC3), byte_id(0xA9)}));
  EXPECT_EQ(tok->encode("\xF0\x9F\x98\x80", false),
            (Ids{p, byte_id(0xF0), byte_id(0x9F), byte_id(0x98), byte_id(0x80)}));
  // Invalid UTF-8 survives too: a lone continuation byte and a truncated sequence.
  EXPECT_EQ(tok->encode("\x80"
                        "a\xE2",
                        false),
            (Ids{p, byte_id(0x80), p + 1, byte_id(0xE2)}));
  EXPECT_EQ(tok->decode(tok->encode("a\xC3\xA9 \x80\xE2", false)), "a\xC3\xA9 \x80\xE2");
}

TEST(SentencePieceTokenizer, UnknownTokenWithoutByteTokens) {
  TokenizerData d = spm_vocab({{kSpace, 0}, {"a", 0}}, /*with_bytes=*/false);
  const int32_t p = first_piece_id(false);
  auto tok = Tokenizer::create(d);
  // One <unk> per unknown character, not per byte.
  EXPECT_EQ(tok->encode("a\xC3\xA9"
                        "a",
                        false),
            (Ids{p, p + 1, 0, p + 1}));
  EXPECT_EQ(tok->token_to_piece(0), "");
  EXPECT_EQ(tok->token_to_piece(0, true), "<unk>");

  d.unk_id = -1;
  d.types[0] = TokenType::kNormal;
  EXPECT_THROW(Tokenizer::create(d)->encode("\xC3\xA9", false), Error);
}

TEST(SentencePieceTokenizer, SpacePrefixAndBos) {
  TokenizerData d = spm_vocab({{kSpace, 0}, {"a", 0}, {sp("a"), -1}});
  const int32_t p = first_piece_id();
  auto tok = Tokenizer::create(d);
  EXPECT_EQ(tok->encode("a", true), (Ids{1, p + 2}));
  EXPECT_EQ(tok->encode("a", false), (Ids{p + 2}));
  EXPECT_EQ(tok->encode("", true), (Ids{1}));

  d.add_bos = false;  // the model says no BOS: add_bos=true cannot force one
  EXPECT_EQ(Tokenizer::create(d)->encode("a", true), (Ids{p + 2}));
  d.add_bos = true;
  d.bos_id = -1;
  EXPECT_EQ(Tokenizer::create(d)->encode("a", true), (Ids{p + 2}));

  d = spm_vocab({{kSpace, 0}, {"a", 0}, {sp("a"), -1}});
  d.add_space_prefix = false;
  auto no_prefix = Tokenizer::create(d);
  EXPECT_EQ(no_prefix->encode("a a", false), (Ids{p + 1, p + 2}));
  EXPECT_FALSE(no_prefix->add_space_prefix());
  EXPECT_EQ(no_prefix->decode(Ids{p + 2, p + 2}), " a a");  // nothing to strip
}

TEST(SentencePieceTokenizer, DecodeDropsOnlyThePrefixSpace) {
  TokenizerData d = spm_vocab({{kSpace, 0}, {"a", 0}, {sp("a"), -1}});
  const int32_t p = first_piece_id();
  auto tok = Tokenizer::create(d);
  EXPECT_EQ(tok->decode(Ids{1, p + 2, p + 2, 2}), "a a");
  EXPECT_EQ(tok->decode(Ids{1, p + 2, p + 2}, /*skip_leading_space=*/false), " a a");
  EXPECT_EQ(tok->decode(Ids{p, p + 2}), " a");  // "  a" minus the prefix space
  for (const std::string s : {"a", " a", "  a  ", "a\n a", "\xC3\xA9 a", ""}) {
    EXPECT_EQ(tok->decode(tok->encode(s, true)), s) << s;
  }
}

TEST(SentencePieceTokenizer, PiecesByTokenType) {
  TokenizerData d = spm_vocab({{sp("a") + kSpace, 0}, {"<user>", 0}});
  const int32_t p = first_piece_id();
  d.types[p + 1] = TokenType::kUserDefined;
  auto tok = Tokenizer::create(d);
  EXPECT_EQ(tok->token_to_piece(p), " a ");
  EXPECT_EQ(tok->token_to_piece(byte_id('\n')), "\n");
  EXPECT_EQ(tok->token_to_piece(1), "");
  EXPECT_EQ(tok->token_to_piece(1, true), "<s>");
  EXPECT_EQ(tok->token_to_piece(p + 1), "<user>");
  EXPECT_THROW(tok->token_to_piece(-1), Error);
  EXPECT_THROW(tok->token_to_piece(tok->vocab_size()), Error);
}

TEST(SentencePieceTokenizer, FilesWithoutTypesGetInferredTypes) {
  // llama2.c's tokenizer.bin has no types: byte tokens and BOS/EOS must still be recognized.
  TokenizerData d = spm_vocab({{kSpace, 0}, {"a", 0}});
  d.types.clear();
  auto tok = Tokenizer::create(d);
  EXPECT_TRUE(tok->is_control(1));
  EXPECT_EQ(tok->token_to_piece(byte_id(0x41)), "A");
  EXPECT_EQ(tok->token_to_piece(2), "");
}

TEST(SentencePieceTokenizer, RejectsInconsistentData) {
  TokenizerData d = spm_vocab({{"a", 0}});
  d.bos_id = 100000;
  EXPECT_THROW(Tokenizer::create(d), Error);
  d = spm_vocab({{"a", 0}});
  d.scores.resize(d.tokens.size() + 1);
  EXPECT_THROW(Tokenizer::create(d), Error);
  TokenizerData none;
  try {
    Tokenizer::create(none);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
  }
}

TEST(SentencePieceTokenizer, LongTextStaysFast) {
  // A quadratic merge loop would take minutes here; the priority queue takes milliseconds.
  TokenizerData d =
      spm_vocab({{kSpace, 0}, {"a", 0}, {"b", 0}, {"ab", -1}, {"abab", -2}, {sp("abab"), -3}});
  auto tok = Tokenizer::create(d);
  std::string text;
  while (text.size() < 200000) text += "abab abababab ";
  const Ids ids = tok->encode(text, false);
  EXPECT_GT(ids.size(), text.size() / 10);
  EXPECT_EQ(tok->decode(ids), text);
  const std::string unbroken(200000, 'a');  // one word, no merges possible
  EXPECT_EQ(tok->encode(unbroken, false).size(), unbroken.size() + 1);
}

}  // namespace
}  // namespace rapide
