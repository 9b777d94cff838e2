#include <gtest/gtest.h>

#include "tiny_vocab.h"
#include "tokenizer/special_token_splitter.h"
#include "tokenizer/tokenizer.h"

namespace rapide {
namespace {

using testing::first_piece_id;
using testing::kSpace;
using testing::spm_vocab;
using Ids = std::vector<int32_t>;

TEST(SpecialTokenSplitter, LongestTokensFirst) {
  TokenizerData d = spm_vocab({{"<|a|>", 0}, {"<|a|><|b|>", 0}, {"<|b|>", 0}});
  const int32_t p = first_piece_id();
  for (int i = 0; i < 3; ++i) d.types[p + i] = TokenType::kControl;
  const SpecialTokenSplitter splitter(d);
  const std::string text = "x<|a|><|b|>y<|b|><|a|>";
  const auto fragments = splitter.split(text, true);
  ASSERT_EQ(fragments.size(), 5u);
  EXPECT_EQ(fragments[0].token, -1);
  EXPECT_EQ(text.substr(fragments[0].offset, fragments[0].length), "x");
  EXPECT_EQ(fragments[1].token, p + 1);  // the long token beats <|a|> followed by <|b|>
  EXPECT_EQ(text.substr(fragments[2].offset, fragments[2].length), "y");
  EXPECT_EQ(fragments[3].token, p + 2);
  EXPECT_EQ(fragments[4].token, p + 0);
  // Control tokens are plain text unless parse_special.
  const auto plain = splitter.split(text, false);
  ASSERT_EQ(plain.size(), 1u);
  EXPECT_EQ(plain[0].length, text.size());
  EXPECT_TRUE(splitter.split("", true).empty());
}

TEST(SentencePieceSpecialTokens, SpacePrefixAfterEachSpecialToken) {
  // llama.cpp prepends "▁" to every text fragment that starts the text or follows a special
  // token, which is what "<s>[INST] hi" style prompts depend on.
  TokenizerData d = spm_vocab({{kSpace, 0}, {"a", 0}, {std::string(kSpace) + "a", -1}, {"<x>", 0}});
  const int32_t p = first_piece_id();
  d.types[p + 3] = TokenType::kUserDefined;
  auto tok = Tokenizer::create(d);
  EXPECT_EQ(tok->encode("<s>a</s>a", false, true), (Ids{1, p + 2, 2, p + 2}));
  EXPECT_EQ(tok->encode("a<s>", true, true), (Ids{1, p + 2, 1}));
  // Without parse_special "<s>" is text: '<' 's' '>' have no tokens and fall back to bytes.
  const Ids text_ids = tok->encode("<s>", false, false);
  EXPECT_EQ(text_ids.size(), 4u);
  EXPECT_EQ(tok->decode(text_ids), "<s>");
  // A user-defined token splits the text even without parse_special.
  EXPECT_EQ(tok->encode("a<x>a", false, false), (Ids{p + 2, p + 3, p + 2}));
  EXPECT_TRUE(tok->is_end_of_generation(2));
  EXPECT_FALSE(tok->is_end_of_generation(1));
}

}  // namespace
}  // namespace rapide
