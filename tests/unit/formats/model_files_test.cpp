// Every shared model and tokenizer-test vocabulary loads with the facts models/README.md
// states.
#include <gtest/gtest.h>

#include "formats/model_file.h"
#include "formats_test_util.h"
#include "test_paths.h"

namespace rapide {
namespace {

using testing::shared_path;

void expect_llama_shape(const ModelConfig& c, int dim, int layers, int heads, int kv, int ffn,
                        int vocab) {
  EXPECT_EQ(c.architecture, "llama");
  EXPECT_EQ(c.dim, dim);
  EXPECT_EQ(c.n_layers, layers);
  EXPECT_EQ(c.n_heads, heads);
  EXPECT_EQ(c.n_kv_heads, kv);
  EXPECT_EQ(c.head_dim, dim / heads);
  EXPECT_EQ(c.ffn_dim, ffn);
  EXPECT_EQ(c.vocab_size, vocab);
  EXPECT_EQ(c.rope_style, RopeStyle::kNormal);
  EXPECT_FALSE(c.qkv_bias);
  EXPECT_EQ(c.rope_scale, 1.0f);
}

TEST(ModelFiles, Stories260KGguf) {
  RAPIDE_REQUIRE_SHARED("models/stories260K");
  const ModelFile m = load_model(shared_path("models/stories260K/stories260K.gguf"));
  EXPECT_EQ(m.format, "gguf");
  expect_llama_shape(m.config, 64, 5, 8, 4, 172, 512);
  EXPECT_FLOAT_EQ(m.config.rms_eps, 1e-5f);
  EXPECT_EQ(m.config.rope_theta, 10000.0f);
  EXPECT_FALSE(m.config.tied_embeddings);  // the converter wrote the shared matrix twice
  EXPECT_EQ(m.tensors.size(), 48u);
  EXPECT_EQ(m.get("blk.4.ffn_down.weight").shape, (std::vector<int64_t>{172, 64}));
  const TokenizerData& t = m.tokenizer;
  EXPECT_EQ(t.kind, TokenizerKind::kSentencePiece);
  ASSERT_EQ(t.tokens.size(), 512u);
  EXPECT_EQ(t.tokens[1], "<s>");
  EXPECT_EQ(t.types[0], TokenType::kUnknown);
  EXPECT_EQ(t.types[3], TokenType::kByte);
  EXPECT_EQ(t.bos_id, 1);
  EXPECT_EQ(t.eos_id, 2);
  EXPECT_EQ(t.unk_id, 0);
  EXPECT_EQ(t.pad_id, -1);  // stored as 0xFFFFFFFF
  EXPECT_TRUE(t.add_bos);
  EXPECT_TRUE(t.add_space_prefix);
}

TEST(ModelFiles, TinyStories656KF16AndQ8_0) {
  RAPIDE_REQUIRE_SHARED("models/tinystories-656k");
  for (const char* file : {"TinyStories-656K-F16.gguf", "TinyStories-656K-Q8_0.gguf"}) {
    SCOPED_TRACE(file);
    const ModelFile m = load_model(shared_path(std::string("models/tinystories-656k/") + file));
    expect_llama_shape(m.config, 128, 2, 8, 4, 384, 2048);
    EXPECT_EQ(m.config.max_context, 512);
    EXPECT_FLOAT_EQ(m.config.rms_eps, 1e-6f);
    EXPECT_TRUE(m.config.tied_embeddings);
    EXPECT_EQ(m.find("output.weight"), nullptr);
    const bool q8 = std::string(file).find("Q8_0") != std::string::npos;
    EXPECT_EQ(m.get("blk.0.attn_q.weight").type, q8 ? TensorType::kQ8_0 : TensorType::kF16);
    EXPECT_EQ(m.get("blk.0.attn_norm.weight").type, TensorType::kF32);
    const TokenizerData& t = m.tokenizer;
    EXPECT_EQ(t.kind, TokenizerKind::kSentencePiece);
    ASSERT_EQ(t.tokens.size(), 2048u);
    EXPECT_EQ(t.tokens[1], "<|start_story|>");
    EXPECT_EQ(t.bos_id, 1);
    EXPECT_EQ(t.eos_id, 2);
    EXPECT_EQ(t.pad_id, 0);
    EXPECT_EQ(t.pre, "default");
    EXPECT_TRUE(t.chat_template.empty());
  }
}

TEST(ModelFiles, Llama2TinyRandomHasTheLlama2Vocabulary) {
  RAPIDE_REQUIRE_SHARED("models/llama2-tiny-random");
  const ModelFile m = load_model(shared_path("models/llama2-tiny-random/llama-2-tiny-random.gguf"));
  expect_llama_shape(m.config, 8, 1, 2, 2, 32, 32000);
  EXPECT_EQ(m.config.max_context, 4096);
  EXPECT_EQ(m.tokenizer.tokens.size(), 32000u);
  EXPECT_EQ(m.tokenizer.tokens[13], "<0x0A>");
  EXPECT_EQ(m.tokenizer.types[13], TokenType::kByte);
  EXPECT_EQ(m.get("output.weight").type, TensorType::kF16);
}

TEST(ModelFiles, TokenizerTestVocabularies) {
  RAPIDE_REQUIRE_SHARED("tokenizer-tests");
  const ModelFile gpt2 = load_model(shared_path("tokenizer-tests/ggml-vocab-gpt-2.gguf"));
  EXPECT_EQ(gpt2.config.architecture, "gpt2");
  EXPECT_TRUE(gpt2.tensors.empty());
  EXPECT_EQ(gpt2.tokenizer.kind, TokenizerKind::kByteLevelBpe);
  EXPECT_EQ(gpt2.tokenizer.tokens.size(), 50257u);
  EXPECT_EQ(gpt2.tokenizer.merges.size(), 50000u);
  EXPECT_EQ(gpt2.tokenizer.merges[0], "\xc4\xa0 t");
  EXPECT_EQ(gpt2.tokenizer.pre, "gpt-2");
  EXPECT_EQ(gpt2.tokenizer.bos_id, 50256);
  EXPECT_EQ(gpt2.tokenizer.types[50256], TokenType::kControl);
  EXPECT_FALSE(gpt2.tokenizer.add_space_prefix);
  EXPECT_EQ(gpt2.tokenizer.scores.size(), 50257u);

  const ModelFile spm = load_model(shared_path("tokenizer-tests/ggml-vocab-llama-spm.gguf"));
  EXPECT_EQ(spm.config.dim, 4096);
  EXPECT_EQ(spm.config.vocab_size, 32000);
  EXPECT_EQ(spm.tokenizer.kind, TokenizerKind::kSentencePiece);
  EXPECT_EQ(spm.tokenizer.tokens.size(), 32000u);
  EXPECT_FLOAT_EQ(spm.tokenizer.scores.back(), -31740.0f);
}

TEST(ModelFiles, TotalBytesAddUp) {
  RAPIDE_REQUIRE_SHARED("models/tinystories-656k");
  const ModelFile m = load_model(shared_path("models/tinystories-656k/TinyStories-656K-F16.gguf"));
  uint64_t total = 0;
  for (const auto& t : m.tensors) {
    EXPECT_EQ(static_cast<int64_t>(t.size_bytes), tensor_row_bytes(t.type, t.shape[0]) * t.rows())
        << t.name;
    total += t.size_bytes;
  }
  EXPECT_EQ(m.total_tensor_bytes(), total);
}

}  // namespace
}  // namespace rapide
