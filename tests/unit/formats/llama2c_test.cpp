// llama2.c checkpoints: legacy and v1 exports of stories260K hold the same weights as its
// GGUF, tok512.bin gives the GGUF's vocabulary, and malformed files are rejected.
#include "formats/llama2c_loader.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "base/mapped_file.h"
#include "formats_test_util.h"
#include "test_paths.h"

namespace rapide {
namespace {

using testing::expect_error;
using testing::shared_path;

const std::string kDir = "models/stories260K/";

void expect_same_tensor(const TensorView& a, const TensorView& b) {
  ASSERT_EQ(a.type, b.type) << a.name;
  ASSERT_EQ(a.shape, b.shape) << a.name;
  ASSERT_EQ(a.size_bytes, b.size_bytes) << a.name;
  EXPECT_EQ(std::memcmp(a.data, b.data, a.size_bytes), 0) << a.name << " differs";
}

TEST(Llama2c, LegacyV1AndGgufHoldTheSameWeights) {
  RAPIDE_REQUIRE_SHARED("models/stories260K");
  const ModelFile legacy = load_model(shared_path(kDir + "stories260K.bin"));
  const ModelFile v1 = load_model(shared_path(kDir + "stories260K-v1.bin"));
  const ModelFile gguf = load_model(shared_path(kDir + "stories260K.gguf"));
  EXPECT_EQ(legacy.format, "llama2c");
  for (const ModelFile* m : {&legacy, &v1}) {
    const ModelConfig& c = m->config;
    EXPECT_EQ(c.dim, 64);
    EXPECT_EQ(c.n_layers, 5);
    EXPECT_EQ(c.n_heads, 8);
    EXPECT_EQ(c.n_kv_heads, 4);
    EXPECT_EQ(c.ffn_dim, 172);
    EXPECT_EQ(c.vocab_size, 512);
    EXPECT_EQ(c.max_context, 512);
    EXPECT_TRUE(c.tied_embeddings);
    EXPECT_EQ(c.rope_style, RopeStyle::kNormal);
    EXPECT_EQ(m->tensors.size(), 2u + 9 * 5);
    for (const TensorView& t : m->tensors) {
      SCOPED_TRACE(t.name);
      expect_same_tensor(t, gguf.get(t.name));
    }
  }
  // The GGUF converter stored the shared classifier as its own output.weight.
  const TensorView& out = gguf.get("output.weight");
  EXPECT_EQ(std::memcmp(out.data, legacy.get("token_embd.weight").data, out.size_bytes), 0);
}

TEST(Llama2c, Tok512MatchesTheGgufVocabulary) {
  RAPIDE_REQUIRE_SHARED("models/stories260K");
  const ModelFile bin = load_model(shared_path(kDir + "stories260K.bin"));
  const ModelFile gguf = load_model(shared_path(kDir + "stories260K.gguf"));
  const TokenizerData& a = bin.tokenizer;
  const TokenizerData& b = gguf.tokenizer;
  EXPECT_EQ(a.kind, TokenizerKind::kSentencePiece);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.scores, b.scores);
  EXPECT_EQ(a.types, b.types);
  EXPECT_EQ(a.bos_id, b.bos_id);
  EXPECT_EQ(a.eos_id, b.eos_id);
  EXPECT_EQ(a.unk_id, b.unk_id);
  EXPECT_EQ(a.pad_id, b.pad_id);
  EXPECT_EQ(a.add_bos, b.add_bos);
  EXPECT_EQ(a.add_space_prefix, b.add_space_prefix);
}

TEST(Llama2c, FindsTheTokenizerOrLoadsWithout) {
  RAPIDE_REQUIRE_SHARED("models/stories260K");
  testing::TempDir dir;
  std::filesystem::copy_file(shared_path(kDir + "stories260K.bin"), dir.file("m.bin"));
  EXPECT_EQ(load_model(dir.file("m.bin")).tokenizer.kind, TokenizerKind::kNone);
  LoadOptions options;
  options.tokenizer_path = shared_path(kDir + "tok512.bin");
  EXPECT_EQ(load_model(dir.file("m.bin"), options).tokenizer.tokens.size(), 512u);
  std::filesystem::copy_file(shared_path(kDir + "tok512.bin"), dir.file("tokenizer.bin"));
  EXPECT_EQ(load_model(dir.file("m.bin")).tokenizer.tokens.size(), 512u);
  options.tokenizer_path = dir.file("missing.bin");
  expect_error([&] { load_model(dir.file("m.bin"), options); }, ErrorCode::kNotFound,
               "missing.bin");
}

// Sizes at the header's plausibility bound (2^20 each) make the implied file size pass
// int64: computed unchecked it wrapped (undefined behaviour, and a wrapped total could equal
// the real size). Every product and sum is checked now.
TEST(Llama2c, SizesWhoseArithmeticOverflowsAreRejected) {
  testing::TempDir dir;
  const int32_t big = 1 << 20;
  const int32_t header[7] = {big, big, big, big / 2, big / 2, big, big};  // head size 2
  std::string bytes(reinterpret_cast<const char*>(header), sizeof(header));
  bytes += std::string(4096, '\0');
  testing::write_file(dir.file("huge.bin"), bytes);
  expect_error([&] { load_model(dir.file("huge.bin")); }, ErrorCode::kCorrupt, "overflow");
}

TEST(Llama2c, RejectsSizeMismatchesAndOtherVersions) {
  RAPIDE_REQUIRE_SHARED("models/stories260K");
  testing::TempDir dir;
  std::string bytes = read_text_file(shared_path(kDir + "stories260K.bin"));
  testing::write_file(dir.file("long.bin"), bytes + "x");
  expect_error([&] { load_model(dir.file("long.bin")); }, ErrorCode::kCorrupt,
               "is 1056541 bytes but its header (dim 64, hidden 172, layers 5, heads 8, kv heads "
               "4, vocab 512, seq_len 512, shared classifier) implies 1056540 bytes");
  testing::write_file(dir.file("short.bin"), bytes.substr(0, 5000));
  expect_error([&] { load_model(dir.file("short.bin")); }, ErrorCode::kCorrupt, "implies");
  std::string v1 = read_text_file(shared_path(kDir + "stories260K-v1.bin"));
  v1[4] = 2;
  testing::write_file(dir.file("v2.bin"), v1);
  expect_error([&] { load_model(dir.file("v2.bin")); }, ErrorCode::kUnsupported,
               "version 2 is not supported");
  std::string odd = bytes;
  const int32_t heads = 7;  // does not divide dim 64
  std::memcpy(odd.data() + 12, &heads, 4);
  testing::write_file(dir.file("odd.bin"), odd);
  expect_error([&] { load_model(dir.file("odd.bin")); }, ErrorCode::kCorrupt,
               "heads must divide dim");
}

TEST(Llama2c, NegativeVocabMeansASeparateClassifier) {
  RAPIDE_REQUIRE_SHARED("models/stories260K");
  testing::TempDir dir;
  std::string bytes = read_text_file(shared_path(kDir + "stories260K.bin"));
  const int32_t vocab = -512;
  std::memcpy(bytes.data() + 20, &vocab, 4);
  std::string classifier(512 * 64 * 4, '\0');
  for (size_t i = 0; i < classifier.size(); i += 4) classifier[i + 3] = 0x3f;  // ~0.5
  testing::write_file(dir.file("cls.bin"), bytes + classifier);
  LoadOptions options;
  options.tokenizer_path = shared_path(kDir + "tok512.bin");
  const ModelFile m = load_model(dir.file("cls.bin"), options);
  EXPECT_FALSE(m.config.tied_embeddings);
  EXPECT_EQ(m.config.vocab_size, 512);
  const TensorView& out = m.get("output.weight");
  EXPECT_EQ(out.shape, (std::vector<int64_t>{64, 512}));
  EXPECT_EQ(std::memcmp(out.data, classifier.data(), classifier.size()), 0);
}

TEST(Llama2c, RejectsBrokenTokenizers) {
  RAPIDE_REQUIRE_SHARED("models/stories260K");
  const std::string tok = read_text_file(shared_path(kDir + "tok512.bin"));
  const auto* p = reinterpret_cast<const uint8_t*>(tok.data());
  expect_error([&] { parse_llama2c_tokenizer(p, tok.size() - 3, "t.bin", 512); },
               ErrorCode::kCorrupt, "truncated while reading token 511");
  expect_error([&] { parse_llama2c_tokenizer(p, tok.size(), "t.bin", 500); }, ErrorCode::kCorrupt,
               "follow the model's 500 tokens");
  std::string bad = tok;
  const int32_t huge = 1 << 30;
  std::memcpy(bad.data() + 8, &huge, 4);  // length of token 0
  expect_error(
      [&] {
        parse_llama2c_tokenizer(reinterpret_cast<const uint8_t*>(bad.data()), bad.size(), "t.bin",
                                512);
      },
      ErrorCode::kCorrupt, "token 0 has length 1073741824");
}

}  // namespace
}  // namespace rapide
