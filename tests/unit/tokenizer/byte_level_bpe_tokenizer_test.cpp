#include <gtest/gtest.h>

#include <thread>

#include "base/error.h"
#include "tiny_vocab.h"
#include "tokenizer/tokenizer.h"

namespace rapide {
namespace {

using testing::byte_level_vocab;
using Ids = std::vector<int32_t>;

constexpr const char* kG = "\xC4\xA0";  // "Ġ", the character standing for a space byte

int32_t b(char c) {
  return static_cast<uint8_t>(c);
}  // byte token id in byte_level_vocab

int32_t add_token(TokenizerData& d, const std::string& text, TokenType type) {
  d.tokens.push_back(text);
  d.types.push_back(type);
  return static_cast<int32_t>(d.tokens.size() - 1);
}

TEST(ByteLevelBpeTokenizer, AppliesMergesByRank) {
  auto tok = Tokenizer::create(
      byte_level_vocab({{"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"}, {kG, "w"}}));
  EXPECT_EQ(tok->encode("hello world", false), (Ids{259, 260, b('o'), b('r'), b('l'), b('d')}));
  EXPECT_EQ(tok->token_to_piece(260), " w");
  EXPECT_FALSE(tok->add_space_prefix());
  EXPECT_EQ(tok->decode(tok->encode(" hello", false)), " hello");

  // The lower rank wins wherever it is in the word.
  EXPECT_EQ(Tokenizer::create(byte_level_vocab({{"a", "b"}, {"b", "c"}}))->encode("abc", false),
            (Ids{256, b('c')}));
  EXPECT_EQ(Tokenizer::create(byte_level_vocab({{"b", "c"}, {"a", "b"}}))->encode("abc", false),
            (Ids{b('a'), 256}));
}

TEST(ByteLevelBpeTokenizer, SameRankMergesLeftmostFirst) {
  auto tok = Tokenizer::create(byte_level_vocab({{"a", "a"}, {"aa", "aa"}}));
  EXPECT_EQ(tok->encode("aaa", false), (Ids{256, b('a')}));
  EXPECT_EQ(tok->encode("aaaaa", false), (Ids{257, b('a')}));
}

TEST(ByteLevelBpeTokenizer, MergesStopAtWordBoundaries) {
  // "bĠ" is a merge, but GPT-2's pre-tokenizer puts the space in front of the next word.
  auto tok = Tokenizer::create(byte_level_vocab({{"b", kG}, {kG, "a"}}));
  EXPECT_EQ(tok->encode("ab ab", false), (Ids{b('a'), b('b'), 257, b('b')}));
}

TEST(ByteLevelBpeTokenizer, EveryByteSequenceRoundTrips) {
  auto tok = Tokenizer::create(byte_level_vocab({{"h", "i"}, {kG, "hi"}}));
  std::string all;
  for (int c = 0; c < 256; ++c) all.push_back(static_cast<char>(c));
  for (const std::string& s :
       {all, std::string("hi hi\xF0\x9F\x98 \x80\xE2\x82"), std::string("  \n\t "),
        std::string("\xE4\xBD\xA0\xE5\xA5\xBD hi")}) {
    const Ids ids = tok->encode(s, false);
    EXPECT_EQ(tok->decode(ids), s);
    std::string pieces;
    for (const int32_t id : ids) pieces += tok->token_to_piece(id);
    EXPECT_EQ(pieces, s);
  }
}

TEST(ByteLevelBpeTokenizer, Llama3TakesWholeWordTokens) {
  // "abc" is a token that no merge produces: ignore_merges (Llama 3) still emits it whole.
  TokenizerData d = byte_level_vocab({{"a", "b"}}, "gpt2");
  const int32_t abc = add_token(d, "abc", TokenType::kNormal);
  EXPECT_EQ(Tokenizer::create(d)->encode("abc", false), (Ids{256, b('c')}));
  d.pre = "llama3";
  EXPECT_EQ(Tokenizer::create(d)->encode("abc", false), (Ids{abc}));
  d.pre = "qwen2";
  EXPECT_EQ(Tokenizer::create(d)->encode("abc", false), (Ids{256, b('c')}));
}

TEST(ByteLevelBpeTokenizer, SpecialTokens) {
  TokenizerData d = byte_level_vocab({{"h", "i"}});
  const int32_t eot = add_token(d, "<|endoftext|>", TokenType::kControl);
  const int32_t im_end = add_token(d, "<|im_end|>", TokenType::kControl);
  const int32_t tool = add_token(d, "<tool>", TokenType::kUserDefined);
  const int32_t plain = add_token(d, "<|end|>", TokenType::kNormal);  // not control: not EOG
  d.eos_id = eot;
  d.bos_id = eot;
  auto tok = Tokenizer::create(d);
  EXPECT_EQ(tok->encode("hi<|endoftext|>hi", false, true), (Ids{256, eot, 256}));
  const Ids as_text = tok->encode("hi<|endoftext|>", false, false);
  EXPECT_GT(as_text.size(), 3u);
  EXPECT_EQ(tok->decode(as_text), "hi<|endoftext|>");
  // User-defined tokens match even without parse_special.
  EXPECT_EQ(tok->encode("<tool>hi", false, false), (Ids{tool, 256}));
  EXPECT_EQ(tok->token_to_piece(tool), "<tool>");
  EXPECT_EQ(tok->token_to_piece(eot), "");
  EXPECT_EQ(tok->token_to_piece(eot, true), "<|endoftext|>");
  EXPECT_TRUE(tok->is_end_of_generation(eot));
  EXPECT_TRUE(tok->is_end_of_generation(im_end));
  EXPECT_FALSE(tok->is_end_of_generation(plain));
  EXPECT_FALSE(tok->is_end_of_generation(256));
  EXPECT_FALSE(tok->is_end_of_generation(-1));
  // BOS only when the data asks for it.
  EXPECT_EQ(tok->encode("hi", true), (Ids{256}));
  d.add_bos = true;
  EXPECT_EQ(Tokenizer::create(d)->encode("hi", true), (Ids{eot, 256}));
}

TEST(ByteLevelBpeTokenizer, RejectsBadData) {
  TokenizerData d = byte_level_vocab({{"a", "b"}});
  d.pre = "starcoder-9000";
  try {
    Tokenizer::create(d);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    EXPECT_NE(std::string(e.what()).find("starcoder-9000"), std::string::npos);
  }
  d = byte_level_vocab({{"a", "b"}});
  d.merges.push_back("abc");
  EXPECT_THROW(Tokenizer::create(d), Error);
  d = byte_level_vocab({{"a", "b"}});
  d.merges.push_back("ab zz");
  try {
    Tokenizer::create(d);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kCorrupt);
  }
}

TEST(ByteLevelBpeTokenizer, LongTextStaysFast) {
  auto tok = Tokenizer::create(byte_level_vocab({{"a", "b"}, {"ab", "ab"}, {kG, "abab"}}));
  std::string text;
  while (text.size() < 200000) text += "abab ababab, 12345\n";
  const Ids ids = tok->encode(text, false);
  EXPECT_EQ(tok->decode(ids), text);
  const std::string one_word(200000, 'a');  // a single pre-tokenizer word
  EXPECT_EQ(tok->encode(one_word, false).size(), one_word.size());
  const std::string spaces(200000, ' ');
  EXPECT_EQ(tok->decode(tok->encode(spaces + "x", false)), spaces + "x");
}

TEST(ByteLevelBpeTokenizer, ConcurrentEncodesAgree) {
  // One tokenizer serves every request thread: encode keeps no shared mutable state.
  auto tok = Tokenizer::create(byte_level_vocab({{"a", "b"}, {kG, "ab"}, {"1", "2"}}));
  std::string text;
  while (text.size() < 20000) text += "ab ab 12 abab, ab!\n";
  const Ids expected = tok->encode(text, false);
  std::vector<Ids> results(4);
  std::vector<std::thread> threads;
  for (auto& result : results) {
    threads.emplace_back([&tok, &text, &result] {
      for (int i = 0; i < 20; ++i) result = tok->encode(text, false);
    });
  }
  for (auto& thread : threads) thread.join();
  for (const Ids& result : results) EXPECT_EQ(result, expected);
}

}  // namespace
}  // namespace rapide
