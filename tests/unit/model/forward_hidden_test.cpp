// Model::forward_hidden (the hidden states /v1/embeddings pools) against an oracle outside
// the forward pass: stories260K ties its output head to the token embeddings (all F32), so
// the logits forward() returns must equal each hidden state's dot product with every
// token_embd row, computed here in plain double arithmetic. Also the embedder's batching:
// sequences sharing a pass get the states they get alone.
#include <gtest/gtest.h>

#include <cstring>

#include "formats/model_file.h"
#include "model/contiguous_kv_store.h"
#include "model/model.h"
#include "serve/embeddings.h"
#include "test_paths.h"

namespace rapide {
namespace {

const std::vector<int32_t> kTokens = {1, 403, 407, 261, 378, 432, 322, 261};  // llama.cpp's long200

TEST(ForwardHidden, TiedHeadOfTheHiddenStatesGivesForwardsLogits) {
  RAPIDE_REQUIRE_SHARED("models/stories260K/stories260K.gguf");
  auto file = std::make_shared<const ModelFile>(
      load_model(testing::shared_path("models/stories260K/stories260K.gguf")));
  Model model(file);
  const ModelConfig& c = model.config();
  const TensorView& embd = file->get("token_embd.weight");
  ASSERT_EQ(embd.type, TensorType::kF32);
  ThreadPool pool(2);

  Batch batch;
  for (size_t p = 0; p < kTokens.size(); ++p)
    batch.add(kTokens[p], 0, static_cast<int32_t>(p), true);
  ContiguousKvStore kv_a(c, 1, 64);
  const std::span<const float> hidden_span = model.forward_hidden(batch, kv_a, pool);
  ASSERT_EQ(hidden_span.size(), kTokens.size() * c.dim);
  const std::vector<float> hidden(hidden_span.begin(), hidden_span.end());
  ContiguousKvStore kv_b(c, 1, 64);
  const std::span<const float> logits = model.forward(batch, kv_b, pool);
  ASSERT_EQ(logits.size(), kTokens.size() * c.vocab_size);

  std::vector<float> row(static_cast<size_t>(c.dim));
  double worst = 0;
  for (size_t t = 0; t < kTokens.size(); ++t) {
    for (int v = 0; v < c.vocab_size; ++v) {
      std::memcpy(row.data(), embd.data + static_cast<size_t>(v) * c.dim * sizeof(float),
                  c.dim * sizeof(float));
      double dot = 0;
      for (int d = 0; d < c.dim; ++d) dot += static_cast<double>(hidden[t * c.dim + d]) * row[d];
      worst = std::max(worst, std::abs(dot - logits[t * c.vocab_size + v]));
    }
  }
  EXPECT_LT(worst, 1e-3) << "largest |hidden . embd - logit|";
}

TEST(Embedder, BatchedInputsGetTheVectorsTheyGetAlone) {
  RAPIDE_REQUIRE_SHARED("models/stories260K/stories260K.gguf");
  auto file = std::make_shared<const ModelFile>(
      load_model(testing::shared_path("models/stories260K/stories260K.gguf")));
  ThreadPool pool(2);
  for (const serve::Pooling pooling : {serve::Pooling::kLast, serve::Pooling::kMean}) {
    serve::Embedder embedder(file, pooling);
    const std::vector<int32_t> other = {1, 291, 376, 268};
    const auto alone = embedder.embed({kTokens}, pool);
    const auto together = embedder.embed({other, kTokens}, pool);
    ASSERT_EQ(together.size(), 2u);
    double norm = 0;
    for (size_t d = 0; d < alone[0].size(); ++d) {
      EXPECT_NEAR(together[1][d], alone[0][d], 1e-5);
      norm += alone[0][d] * alone[0][d];
    }
    EXPECT_NEAR(norm, 1.0, 1e-5);
  }
}

TEST(Embedder, PoolingOfKnownRows) {
  // Rows (3, 4) and (0, 8): last = (0, 1); mean = (1.5, 6) / |.| = (0.2425, 0.9701).
  const std::vector<float> rows = {3, 4, 0, 8};
  const auto last = serve::pool_hidden_states(rows, 2, serve::Pooling::kLast);
  EXPECT_FLOAT_EQ(last[0], 0.0f);
  EXPECT_FLOAT_EQ(last[1], 1.0f);
  const auto mean = serve::pool_hidden_states(rows, 2, serve::Pooling::kMean);
  EXPECT_NEAR(mean[0], 1.5 / std::sqrt(1.5 * 1.5 + 36.0), 1e-6);
  EXPECT_NEAR(mean[1], 6.0 / std::sqrt(1.5 * 1.5 + 36.0), 1e-6);
}

}  // namespace
}  // namespace rapide
