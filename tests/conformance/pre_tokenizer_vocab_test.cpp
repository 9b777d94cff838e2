// Pre-tokenizer families on a real byte-level vocabulary (GPT-2's, from llama.cpp's
// ggml-vocab-gpt-2.gguf) with tokenizer.ggml.pre replaced: what each family's splitting does
// to the ids, and that every family still round-trips llama.cpp's test strings.
#include <gtest/gtest.h>

#include "conformance_files.h"
#include "formats/gguf_model.h"
#include "tokenizer/tokenizer.h"

namespace rapide {
namespace {

using testing::read_file;
using testing::shared_path;
using Ids = std::vector<int32_t>;

constexpr const char* kVocab = "tokenizer-tests/ggml-vocab-gpt-2.gguf";

std::unique_ptr<Tokenizer> with_pre(const std::string& pre) {
  TokenizerData data = tokenizer_from_gguf(GgufFile::open(shared_path(kVocab)));
  data.pre = pre;
  return Tokenizer::create(data);
}

Ids concat(Ids a, const Ids& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(PreTokenizerOnGpt2Vocab, MissingPreIsLlamaCppsDefaultNotGpt2) {
  // A byte-level GGUF without tokenizer.ggml.pre (such as llama.cpp's gpt-neox vocabulary,
  // written before the key existed) gets llama.cpp's default rules: "3333" is the words
  // "333" and "3", while GPT-2's regex keeps "3333" one word.
  RAPIDE_REQUIRE_SHARED(kVocab);
  const auto fallback = with_pre("");
  const auto gpt2 = with_pre("gpt-2");
  const Ids expected = concat(gpt2->encode("333", false), gpt2->encode("3", false));
  EXPECT_EQ(fallback->encode("3333", false), expected);
  EXPECT_NE(gpt2->encode("3333", false), expected);
  // " 3333": the digit run loses its space to a word of its own.
  EXPECT_EQ(fallback->encode(" 3333", false), concat(gpt2->encode(" ", false), expected));
}

TEST(PreTokenizerOnGpt2Vocab, DigitFamiliesOnTheSameVocabulary) {
  RAPIDE_REQUIRE_SHARED(kVocab);
  const auto gpt2 = with_pre("gpt-2");
  const Ids three = gpt2->encode("3", false);
  ASSERT_EQ(three.size(), 1u);
  for (const std::string pre : {"starcoder", "qwen2", "deepseek-coder"}) {
    EXPECT_EQ(with_pre(pre)->encode("3333", false), (Ids(4, three[0]))) << pre;
  }
  EXPECT_EQ(with_pre("llama-bpe")->encode("3333", false),
            concat(gpt2->encode("333", false), three));
  EXPECT_EQ(with_pre("deepseek-llm")->encode("3333", false), gpt2->encode("3333", false));
}

TEST(PreTokenizerOnGpt2Vocab, EveryFamilyRoundTripsTheTestStrings) {
  RAPIDE_REQUIRE_SHARED(kVocab);
  RAPIDE_REQUIRE_SHARED(std::string(kVocab) + ".inp");
  const std::string text = read_file(shared_path(std::string(kVocab) + ".inp"));
  for (const std::string pre : {"", "gpt-2", "mpt", "llama-bpe", "qwen2", "deepseek-llm",
                                "deepseek-coder", "falcon", "starcoder", "refact", "command-r"}) {
    const auto tok = with_pre(pre);
    EXPECT_EQ(tok->decode(tok->encode(text, false)), text) << "pre '" << pre << "'";
  }
}

}  // namespace
}  // namespace rapide
