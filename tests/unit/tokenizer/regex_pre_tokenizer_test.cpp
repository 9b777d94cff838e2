#include "tokenizer/regex_pre_tokenizer.h"

#include <gtest/gtest.h>

#include "base/error.h"

namespace rapide {
namespace {

using Words = std::vector<std::string>;

Words split(const std::string& pre, const std::string& text) {
  const RegexPreTokenizer pre_tokenizer(pre);
  Words words;
  for (const std::string_view w : pre_tokenizer.split(text)) words.emplace_back(w);
  return words;
}

TEST(RegexPreTokenizer, Gpt2) {
  EXPECT_EQ(split("gpt2", "Hello world's  test  \n"),
            (Words{"Hello", " world", "'s", " ", " test", "  \n"}));
  EXPECT_EQ(split("gpt-2", "I'RE 12345 ok!!"), (Words{"I", "'", "RE", " 12345", " ok", "!!"}));
  EXPECT_EQ(split("default", "caf\xC3\xA9 \xE4\xBD\xA0\xE5\xA5\xBD"),
            (Words{"caf\xC3\xA9", " \xE4\xBD\xA0\xE5\xA5\xBD"}));
  EXPECT_EQ(split("", ""), Words{});
}

TEST(RegexPreTokenizer, Llama3) {
  EXPECT_EQ(split("llama3", "I'RE 12345 ok!!\n\nx"),
            (Words{"I", "'RE", " ", "123", "45", " ok", "!!\n\n", "x"}));
  EXPECT_EQ(split("llama-bpe", "a\n\n b"), (Words{"a", "\n\n", " b"}));
  EXPECT_TRUE(RegexPreTokenizer("llama3").ignore_merges());
  EXPECT_FALSE(RegexPreTokenizer("gpt2").ignore_merges());
}

TEST(RegexPreTokenizer, Qwen2SplitsDigitsOneByOne) {
  EXPECT_EQ(split("qwen2", "x 123"), (Words{"x", " ", "1", "2", "3"}));
}

TEST(RegexPreTokenizer, InvalidUtf8BecomesItsOwnWord) {
  const Words words = split("gpt2",
                            "ab\xFF\xFE"
                            "cd \xC3");
  std::string joined;
  for (const auto& w : words) joined += w;
  EXPECT_EQ(joined,
            "ab\xFF\xFE"
            "cd \xC3");
  EXPECT_EQ(words.front(), "ab");
}

TEST(RegexPreTokenizer, RejectsUnknownFamilies) {
  try {
    RegexPreTokenizer("falcon-9000");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    EXPECT_NE(std::string(e.what()).find("'falcon-9000'"), std::string::npos);
  }
}

TEST(RegexPreTokenizer, LongInputsCoverTheText) {
  const RegexPreTokenizer pre("llama3");
  std::string text;
  while (text.size() < 300000) text += "The year 2024 was   long;\n\t she said \"ok\". ";
  text += std::string(100000, ' ');
  size_t covered = 0;
  for (const std::string_view w : pre.split(text)) covered += w.size();
  EXPECT_EQ(covered, text.size());
}

}  // namespace
}  // namespace rapide
