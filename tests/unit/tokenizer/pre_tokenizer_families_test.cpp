// Each pre-tokenizer family on strings whose splits differ between the families: digit runs,
// contractions, whitespace runs, punctuation next to spaces, CJK and non-ASCII letters. The
// expected words are worked out by hand from the published regexes, applied as llama.cpp
// applies them (each regex re-splits every piece, unmatched stretches stay pieces); the
// derivation is in the comments where it is not obvious.
#include <gtest/gtest.h>

#include "base/error.h"
#include "tokenizer/regex_pre_tokenizer.h"

namespace rapide {
namespace {

using Words = std::vector<std::string>;

Words split(const std::string& pre, const std::string& text) {
  const RegexPreTokenizer pre_tokenizer(pre);
  Words words;
  for (const std::string_view w : pre_tokenizer.split(text)) words.emplace_back(w);
  return words;
}

const std::string kNumbers = "a 12345, b's";
const std::string kOperator = "x  +=y";
const std::string kCjk = "a \xE4\xBD\xA0\xE5\xA5\xBD";  // "a 你好"

TEST(PreTokenizerFamilies, Default) {
  // No tokenizer.ggml.pre at all: llama.cpp's default. Punctuation runs are cut out first,
  // so "'s" is no contraction; digit runs are cut from their space, then into threes.
  for (const std::string pre : {"", "default"}) {
    EXPECT_EQ(split(pre, "3333"), (Words{"333", "3"}));
    EXPECT_EQ(split(pre, kNumbers), (Words{"a", " ", "123", "45", ",", " b", "'", "s"}));
    // "+=" is a symbol run of the first regex; "x  " then ends in a whitespace run.
    EXPECT_EQ(split(pre, kOperator), (Words{"x", "  ", "+=", "y"}));
    EXPECT_EQ(split(pre, kCjk), (Words{"a", " \xE4\xBD\xA0\xE5\xA5\xBD"}));
  }
}

TEST(PreTokenizerFamilies, Gpt2AndMpt) {
  for (const std::string pre : {"gpt-2", "mpt", "olmo", "phi-2"}) {
    EXPECT_EQ(split(pre, "3333"), (Words{"3333"}));
    EXPECT_EQ(split(pre, kNumbers), (Words{"a", " 12345", ",", " b", "'s"}));
    // \s+(?!\S) leaves the last space to the word after it.
    EXPECT_EQ(split(pre, kOperator), (Words{"x", " ", " +=", "y"}));
    // A lone "\n" before a letter matches nothing and is a piece of its own.
    EXPECT_EQ(split(pre, "a\n\nb"), (Words{"a", "\n", "\n", "b"}));
  }
}

TEST(PreTokenizerFamilies, Llama3) {
  for (const std::string pre : {"llama-bpe", "llama3", "llama-v3"}) {
    EXPECT_EQ(split(pre, "3333"), (Words{"333", "3"}));
    // The lone space before digits is matched by the final \s+.
    EXPECT_EQ(split(pre, kNumbers), (Words{"a", " ", "123", "45", ",", " b", "'s"}));
    EXPECT_EQ(split(pre, kOperator), (Words{"x", " ", " +=", "y"}));
    EXPECT_EQ(split(pre, "a\n\nb"), (Words{"a", "\n\n", "b"}));
    EXPECT_EQ(split(pre, "I'M ok!!\n\nx"), (Words{"I", "'M", " ok", "!!\n\n", "x"}));
    EXPECT_EQ(split(pre, kCjk), (Words{"a", " \xE4\xBD\xA0\xE5\xA5\xBD"}));
  }
  EXPECT_TRUE(RegexPreTokenizer("llama-bpe").ignore_merges());
  EXPECT_FALSE(RegexPreTokenizer("dbrx").ignore_merges());
}

TEST(PreTokenizerFamilies, Qwen2) {
  for (const std::string pre : {"qwen2", "deepseek-r1-qwen"}) {
    EXPECT_EQ(split(pre, "3333"), (Words{"3", "3", "3", "3"}));
    EXPECT_EQ(split(pre, kNumbers), (Words{"a", " ", "1", "2", "3", "4", "5", ",", " b", "'s"}));
    EXPECT_EQ(split(pre, "a\n\nb"), (Words{"a", "\n\n", "b"}));
  }
  EXPECT_FALSE(RegexPreTokenizer("qwen2").ignore_merges());
}

TEST(PreTokenizerFamilies, DeepseekLlm) {
  const std::string pre = "deepseek-llm";
  EXPECT_EQ(split(pre, "3333"), (Words{"3333"}));
  // Letters: "a", " b", "s"; punctuation then cuts "," off " 12345,"; digits leave " ".
  EXPECT_EQ(split(pre, kNumbers), (Words{"a", " ", "12345", ",", " b", "'", "s"}));
  // Each newline alone, first of all.
  EXPECT_EQ(split(pre, "a\n\nb"), (Words{"a", "\n", "\n", "b"}));
  // CJK is no letter here: " 你好" stays unmatched until the CJK regex cuts the space off.
  EXPECT_EQ(split(pre, kCjk), (Words{"a", " ", "\xE4\xBD\xA0\xE5\xA5\xBD"}));
  // U+02B0 (modifier letter, Lm) is not among its cased letters.
  EXPECT_EQ(split(pre,
                  "a\xCA\xB0"
                  "b"),
            (Words{"a", "\xCA\xB0", "b"}));
  // Full-width exclamation marks are a punctuation run.
  EXPECT_EQ(split(pre,
                  "a\xEF\xBC\x81\xEF\xBC\x81"
                  "b"),
            (Words{"a", "\xEF\xBC\x81\xEF\xBC\x81", "b"}));
}

TEST(PreTokenizerFamilies, DeepseekCoder) {
  const std::string pre = "deepseek-coder";
  EXPECT_EQ(split(pre, "3333"), (Words{"3", "3", "3", "3"}));
  EXPECT_EQ(split(pre, kNumbers), (Words{"a", " ", "1", "2", "3", "4", "5", ",", " b", "'", "s"}));
  EXPECT_EQ(split(pre, "a\n\nb"), (Words{"a", "\n", "\n", "b"}));
  // CJK is \p{L}, so " 你好" is first a letter run, then the CJK regex cuts the space off.
  EXPECT_EQ(split(pre, kCjk), (Words{"a", " ", "\xE4\xBD\xA0\xE5\xA5\xBD"}));
  // "+=" is no \p{P} (both are symbols): it stays with the spaces before it.
  EXPECT_EQ(split(pre, kOperator), (Words{"x", "  +=", "y"}));
}

TEST(PreTokenizerFamilies, Falcon) {
  const std::string pre = "falcon";
  EXPECT_EQ(split(pre, "3333"), (Words{"333", "3"}));
  // No digit-run step as in the default, but cutting " 12345" into threes leaves the space
  // as an unmatched piece of its own all the same.
  EXPECT_EQ(split(pre, kNumbers), (Words{"a", " ", "123", "45", ",", " b", "'", "s"}));
  EXPECT_EQ(split(pre, kOperator), (Words{"x", "  ", "+=", "y"}));
  // The backtick is isolated too (not by the default).
  EXPECT_EQ(split(pre, "x `y"), (Words{"x", " ", "`", "y"}));
  EXPECT_EQ(split("default", "x `y"), (Words{"x", " `", "y"}));
}

TEST(PreTokenizerFamilies, StarcoderRefactCommandR) {
  for (const std::string pre : {"starcoder", "refact", "command-r"}) {
    EXPECT_EQ(split(pre, "3333"), (Words{"3", "3", "3", "3"}));
    // Digits alone first; GPT-2's rules then split "a " and ", b's".
    EXPECT_EQ(split(pre, kNumbers), (Words{"a", " ", "1", "2", "3", "4", "5", ",", " b", "'s"}));
    EXPECT_EQ(split(pre, kOperator), (Words{"x", " ", " +=", "y"}));
  }
}

TEST(PreTokenizerFamilies, WhiteSpaceIsUnicodeWhiteSpace) {
  // U+180E (Mongolian vowel separator) is no White_Space for llama.cpp (PCRE2's \s would take
  // it): after "!" it continues the punctuation run instead of being a whitespace piece.
  const std::string mvs = "\xE1\xA0\x8E";
  for (const std::string pre : {"gpt-2", "llama-bpe", "qwen2"}) {
    EXPECT_EQ(split(pre, "!" + mvs), (Words{"!" + mvs})) << pre;
  }
  // U+3000 (ideographic space) is White_Space: a whitespace run at the end.
  EXPECT_EQ(split("gpt-2", "a\xE3\x80\x80\xE3\x80\x80"), (Words{"a", "\xE3\x80\x80\xE3\x80\x80"}));
}

TEST(PreTokenizerFamilies, UnknownNameIsAnErrorNamingIt) {
  try {
    RegexPreTokenizer("no-such-tokenizer");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    const std::string message = e.what();
    EXPECT_NE(message.find("'no-such-tokenizer'"), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace rapide
