// llama.cpp's tokenizer conformance vectors (models/ggml-vocab-*.gguf.inp/.out): every string
// must encode to exactly the ids llama.cpp's test-tokenizer-0 expects (no BOS, no special
// parsing) and decode back to itself.
#include <gtest/gtest.h>

#include <sstream>

#include "conformance_files.h"
#include "formats/gguf_model.h"
#include "tokenizer/tokenizer.h"

namespace rapide {
namespace {

using testing::read_file;
using testing::shared_path;
using Ids = std::vector<int32_t>;

struct Vector {
  std::string text;
  Ids ids;
};

// .inp holds the strings, each followed by the line "__ggml_vocab_test__" (so the file ends
// with the separator); .out holds one line of space-separated ids per string.
std::vector<Vector> read_vectors(const std::string& vocab) {
  const std::string inp = read_file(shared_path("tokenizer-tests/" + vocab + ".inp"));
  const std::string out = read_file(shared_path("tokenizer-tests/" + vocab + ".out"));
  const std::string separator = "\n__ggml_vocab_test__\n";
  std::vector<Vector> vectors;
  size_t start = 0;
  for (size_t pos = inp.find(separator); pos != std::string::npos;
       pos = inp.find(separator, start)) {
    vectors.push_back({inp.substr(start, pos - start), {}});
    start = pos + separator.size();
  }
  EXPECT_EQ(start, inp.size()) << "text after the last separator in " << vocab << ".inp";

  std::istringstream lines(out);
  std::string line;
  size_t i = 0;
  for (; std::getline(lines, line); ++i) {
    if (i >= vectors.size()) break;
    std::istringstream numbers(line);
    for (int32_t id; numbers >> id;) vectors[i].ids.push_back(id);
  }
  EXPECT_EQ(i, vectors.size()) << vocab << ".out has a different number of lines";
  return vectors;
}

std::unique_ptr<Tokenizer> load_vocab(const std::string& vocab) {
  return Tokenizer::create(
      tokenizer_from_gguf(GgufFile::open(shared_path("tokenizer-tests/" + vocab))));
}

std::string printable(const std::string& s) {
  std::string out;
  for (const char c : s) {
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else {
      out += c;
    }
  }
  return out;
}

// The vocabulary and both vector files: an absent .inp would otherwise read as zero vectors.
class TokenizerVectors : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    for (const char* suffix : {"", ".inp", ".out"}) {
      RAPIDE_REQUIRE_SHARED("tokenizer-tests/" + GetParam() + suffix);
    }
  }
};

TEST_P(TokenizerVectors, MatchLlamaCppExactly) {
  const std::string vocab = GetParam();
  const auto tok = load_vocab(vocab);
  const std::vector<Vector> vectors = read_vectors(vocab);
  ASSERT_EQ(vectors.size(), 46u);
  size_t matched = 0, round_trips = 0;
  for (const Vector& v : vectors) {
    const Ids ids = tok->encode(v.text, /*add_bos=*/false, /*parse_special=*/false);
    EXPECT_EQ(ids, v.ids) << "text: '" << printable(v.text) << "'";
    matched += ids == v.ids;
    const std::string decoded = tok->decode(ids);
    EXPECT_EQ(decoded, v.text) << "round trip of '" << printable(v.text) << "'";
    round_trips += decoded == v.text;
  }
  std::cout << vocab << ": " << matched << "/" << vectors.size() << " vectors match, "
            << round_trips << "/" << vectors.size() << " round trips\n";
}

TEST_P(TokenizerVectors, StreamingMatchesDecode) {
  const std::string vocab = GetParam();
  const auto tok = load_vocab(vocab);
  for (const Vector& v : read_vectors(vocab)) {
    StreamingDetokenizer detok(*tok);
    std::string streamed;
    for (const int32_t id : v.ids) streamed += detok.push(id);
    streamed += detok.flush();
    // Every vector is valid UTF-8, so streaming loses nothing.
    EXPECT_EQ(streamed, v.text) << "text: '" << printable(v.text) << "'";
  }
}

TEST_P(TokenizerVectors, LongTextRoundTrips) {
  // ~100 KB of the vectors' mixed scripts, emoji and whitespace runs as one string: checks
  // nothing is lost at scale and (by the test's run time) that encoding is not quadratic.
  const std::string vocab = GetParam();
  const auto tok = load_vocab(vocab);
  const std::string inp = read_file(shared_path("tokenizer-tests/" + vocab + ".inp"));
  std::string text;
  while (text.size() < 100000) text += inp;
  const Ids ids = tok->encode(text, false);
  EXPECT_GT(ids.size(), text.size() / 8);
  EXPECT_EQ(tok->decode(ids), text);
}

INSTANTIATE_TEST_SUITE_P(Vocabularies, TokenizerVectors,
                         ::testing::Values("ggml-vocab-llama-spm.gguf", "ggml-vocab-gpt-2.gguf"),
                         [](const auto& info) {
                           return info.param == "ggml-vocab-gpt-2.gguf" ? std::string("Gpt2")
                                                                        : std::string("LlamaSpm");
                         });

TEST(TokenizerVocabularies, Gpt2SpecialTokenAndPieces) {
  RAPIDE_REQUIRE_SHARED("tokenizer-tests/ggml-vocab-gpt-2.gguf");
  const auto tok = load_vocab("ggml-vocab-gpt-2.gguf");
  EXPECT_EQ(tok->encode("Hello<|endoftext|>", false, true), (Ids{15496, 50256}));
  EXPECT_NE(tok->encode("Hello<|endoftext|>", false, false), (Ids{15496, 50256}));
  EXPECT_TRUE(tok->is_end_of_generation(50256));
  EXPECT_FALSE(tok->add_space_prefix());
  EXPECT_EQ(tok->token_to_piece(50256), "");
  EXPECT_EQ(tok->token_to_piece(50256, true), "<|endoftext|>");
}

TEST(TokenizerVocabularies, LlamaSpmSpecialTokens) {
  RAPIDE_REQUIRE_SHARED("tokenizer-tests/ggml-vocab-llama-spm.gguf");
  const auto tok = load_vocab("ggml-vocab-llama-spm.gguf");
  // "<s>[INST]" prompts: the text after a special token gets its own space prefix.
  EXPECT_EQ(tok->encode("Hello", true), (Ids{1, 15043}));
  EXPECT_EQ(tok->encode("<s>Hello</s>", false, true), (Ids{1, 15043, 2}));
  EXPECT_EQ(tok->decode(Ids{1, 15043, 3186, 2}), "Hello world");
  EXPECT_TRUE(tok->is_end_of_generation(2));
  EXPECT_FALSE(tok->is_end_of_generation(1));
}

TEST(TokenizerVocabularies, LlamaTinyRandomHasTheLlamaSpmVocabulary) {
  // The random-weight Llama-2 test model carries the real 32000-token vocabulary: it must
  // tokenize like the conformance vocabulary.
  RAPIDE_REQUIRE_SHARED("models/llama2-tiny-random/llama-2-tiny-random.gguf");
  RAPIDE_REQUIRE_SHARED("tokenizer-tests/ggml-vocab-llama-spm.gguf");
  const auto tok = Tokenizer::create(tokenizer_from_gguf(
      GgufFile::open(shared_path("models/llama2-tiny-random/llama-2-tiny-random.gguf"))));
  for (const Vector& v : read_vectors("ggml-vocab-llama-spm.gguf")) {
    EXPECT_EQ(tok->encode(v.text, false), v.ids) << "text: '" << printable(v.text) << "'";
  }
}

}  // namespace
}  // namespace rapide
