// The training model: its whole-model gradient (two blocks, tied and untied head) against
// finite differences; its forward against the inference engine's on a real model
// (stories260K, F32: Model::forward is itself checked against llama.cpp); and the GGUF it
// writes, loaded back by rapide, giving the logits it was trained to give.
#include "train/train_model.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "base/error.h"
#include "engine_logits.h"
#include "formats/gguf_reader.h"
#include "grad_check.h"
#include "test_paths.h"
#include "train/gguf_export.h"
#include "train/losses.h"

namespace rapide::train {
namespace {

TrainShape tiny_shape(bool tied) {
  TrainShape s;
  s.dim = 16;
  s.layers = 2;
  s.heads = 4;
  s.kv_heads = 2;
  s.head_dim = 4;
  s.ffn = 12;
  s.vocab = 11;
  s.ctx = 8;
  s.tied = tied;
  return s;
}

void check_whole_model_gradient(bool tied) {
  TrainModel model(tiny_shape(tied));
  std::mt19937_64 rng(42);
  std::normal_distribution<float> normal(0.0f, 0.3f);
  for (const ParamTensor& t : model.tensors()) {
    for (int64_t i = 0; i < t.size; ++i) {
      model.params()[t.offset + i] = t.matrix ? normal(rng) : 1.0f + 0.1f * normal(rng);
    }
  }
  const int batch = 2, seq = 5;
  const std::vector<int32_t> tokens = {1, 4, 9, 2, 0, 3, 3, 10, 7, 5};
  const std::vector<int32_t> targets = {4, 9, 2, 0, 6, 3, 10, 7, 5, 8};
  const int vocab = model.shape().vocab;
  std::vector<float> dlogits(static_cast<size_t>(batch) * seq * vocab);
  auto loss = [&] {
    const auto logits = model.forward(tokens.data(), batch, seq);
    std::vector<float> scratch(logits.size());
    return cross_entropy(logits.data(), batch * seq, vocab, targets.data(), 1.0f, scratch.data());
  };
  const auto logits = model.forward(tokens.data(), batch, seq);
  cross_entropy(logits.data(), batch * seq, vocab, targets.data(), 1.0f, dlogits.data());
  std::fill(model.grads().begin(), model.grads().end(), 0.0f);
  model.backward(dlogits.data());
  const std::vector<float> grads = model.grads();
  for (const ParamTensor& t : model.tensors()) {
    testing::expect_gradient(t.name, model.params().data() + t.offset, t.size, loss,
                             grads.data() + t.offset, 1e-2f, 3e-2, t.matrix ? 5 : 1);
  }
}

TEST(TrainModel, WholeModelGradientMatchesFiniteDifferencesUntied) {
  check_whole_model_gradient(false);
}

TEST(TrainModel, WholeModelGradientMatchesFiniteDifferencesTied) {
  check_whole_model_gradient(true);
}

using testing::engine_logits;
using testing::kPrompt;

void expect_close(std::span<const float> a, const std::vector<float>& b, float tolerance) {
  ASSERT_EQ(a.size(), b.size());
  float worst = 0.0f;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
  EXPECT_LT(worst, tolerance);
}

TEST(TrainModel, ForwardMatchesTheInferenceEngine) {
  RAPIDE_REQUIRE_SHARED("models/stories260K/stories260K.gguf");
  const std::string path = rapide::testing::shared_path("models/stories260K/stories260K.gguf");
  const ModelFile file = load_model(path);
  TrainModel model = TrainModel::from_file(file);
  EXPECT_EQ(model.shape().kv_heads, 4);
  const auto logits = model.forward(kPrompt.data(), 1, static_cast<int>(kPrompt.size()));
  expect_close(logits, engine_logits(path), 1e-3f);
}

TEST(TrainModel, WrittenGgufLoadsInRapideWithTheSameLogits) {
  RAPIDE_REQUIRE_SHARED("models/stories260K/stories260K.gguf");
  const std::string source = rapide::testing::shared_path("models/stories260K/stories260K.gguf");
  TrainModel model = TrainModel::random(shape_of(load_model(source).config), 7);
  const auto logits = model.forward(kPrompt.data(), 1, static_cast<int>(kPrompt.size()));
  const std::vector<float> expected(logits.begin(), logits.end());
  const std::string out =
      (std::filesystem::temp_directory_path() / "rapide_train_export_test.gguf").string();
  write_gguf(model, GgufFile::open(source), TensorType::kF32, "trained", out);
  expect_close(expected, engine_logits(out), 1e-3f);
  const ModelFile loaded = load_model(out);
  EXPECT_EQ(loaded.config.name, "trained");
  EXPECT_EQ(loaded.tokenizer.tokens.size(), 512u);
  // F16 weights load too, and stay within F16 rounding of the F32 logits.
  write_gguf(model, GgufFile::open(source), TensorType::kF16, "trained", out);
  EXPECT_EQ(load_model(out).get("blk.0.attn_q.weight").type, TensorType::kF16);
  expect_close(expected, engine_logits(out), 2e-2f);
  EXPECT_THROW(write_gguf(model, GgufFile::open(source), TensorType::kQ8_0, "x", out), Error);
  std::filesystem::remove(out);
}

}  // namespace
}  // namespace rapide::train
