// A sequence's greedy tokens must not depend on its batch-mates or on how its prompt was
// chunked: alone == inside a batch of 8 mixed-length sequences == prompt fed 7 at a time,
// with every KV cache type (the quantized ones quantize each query by itself).
#include <gtest/gtest.h>

#include <cstring>

#include "golden/greedy_runner.h"
#include "model/linear_observer.h"
#include "test_paths.h"

namespace rapide::testing {
namespace {

const std::vector<std::string> kPrompts = {
    "Once upon a time",
    "Lily and Tom went to the park. They saw a big dog and a small cat playing in the sun.",
    "One day",
    "The little dog was sad because",
    "Tim had a red ball. He liked to throw it high in the sky. One day the ball",
    "Sue",
    "There was a big tree in the garden. Every morning a bird sang on it, and the children",
    "The sun was hot and",
};
const std::vector<int> kLengths = {40, 12, 33, 25, 8, 47, 19, 30};

// Runs all prompts as one batch: prefill together, then decode together until each
// sequence has its own number of tokens (so the batch shrinks as sequences finish).
std::vector<std::vector<int32_t>> greedy_batched(Model& model,
                                                 const std::vector<std::vector<int32_t>>& prompts,
                                                 ThreadPool& pool, KvType kv_type) {
  const int n = static_cast<int>(prompts.size());
  const int vocab = model.config().vocab_size;
  ContiguousKvStore kv(model.config(), n, 256, kv_type);
  std::vector<std::vector<int32_t>> out(n);
  Batch batch;
  for (int s = 0; s < n; ++s) {
    for (size_t p = 0; p < prompts[s].size(); ++p) {
      batch.add(prompts[s][p], s, static_cast<int>(p), p + 1 == prompts[s].size());
    }
  }
  std::vector<int> order(n);
  for (int s = 0; s < n; ++s) order[s] = s;
  for (;;) {
    auto logits = model.forward(batch, kv, pool);
    std::vector<int> still_running;
    for (size_t row = 0; row < order.size(); ++row) {
      const int s = order[row];
      out[s].push_back(top_two(logits.data() + row * vocab, vocab).best);
      if (static_cast<int>(out[s].size()) < kLengths[s]) still_running.push_back(s);
    }
    if (still_running.empty()) break;
    batch.clear();
    for (int s : still_running) {
      const int pos = static_cast<int>(prompts[s].size() + out[s].size()) - 1;
      batch.add(out[s].back(), s, pos, true);
    }
    order = still_running;
  }
  return out;
}

// Each TEST is this one call, so the rule's skip or failure ends the test.
void check_invariance(const std::string& model_path, KvType kv_type = KvType::kF16) {
  RAPIDE_REQUIRE_SHARED(model_path);
  LoadedForTest t = load_for_test(shared_path(model_path));
  ThreadPool pool(2);
  std::vector<std::vector<int32_t>> prompts;
  for (const auto& p : kPrompts) prompts.push_back(t.tokenizer->encode(p, true));
  auto batched = greedy_batched(*t.model, prompts, pool, kv_type);
  for (size_t s = 0; s < prompts.size(); ++s) {
    auto alone = greedy(*t.model, prompts[s], kLengths[s], pool, 0, kv_type);
    auto chunked = greedy(*t.model, prompts[s], kLengths[s], pool, /*chunk=*/7, kv_type);
    EXPECT_EQ(alone.tokens, batched[s]) << model_path << " prompt " << s << ": batched differs";
    EXPECT_EQ(alone.tokens, chunked.tokens) << model_path << " prompt " << s << ": chunked differs";
  }
}

TEST(BatchInvariance, Stories260KF32) {
  check_invariance("models/stories260K/stories260K.gguf");
}
TEST(BatchInvariance, TinyStoriesF16) {
  check_invariance("models/tinystories-656k/TinyStories-656K-F16.gguf");
}
TEST(BatchInvariance, TinyStoriesQ8_0) {
  check_invariance("models/tinystories-656k/TinyStories-656K-Q8_0.gguf");
}
TEST(BatchInvariance, TinyStoriesF16WithQ8_0Kv) {
  check_invariance("models/tinystories-656k/TinyStories-656K-F16.gguf", KvType::kQ8_0);
}
TEST(BatchInvariance, TinyStoriesF16WithQ4_0Kv) {
  check_invariance("models/tinystories-656k/TinyStories-656K-F16.gguf", KvType::kQ4_0);
}

// An F16 model's norms and SiLU round their output rows to f16 for the products that follow
// (WeightMatrix::Input::kF16Exact) unless a linear observer wants the unrounded values; the
// logits must be the same bits either way: a prefill of 8 sequences' prompts in one batch
// (rounded by the producers), then a decode step of all 8 (8 rows: each product converts its
// input itself in both runs).
class NoOpObserver : public LinearObserver {
 public:
  void observe(int, LinearInput, const float*, int64_t, int64_t) override { ++calls; }
  int calls = 0;
};

TEST(BatchInvariance, F16RoundedInputsGiveTheSameLogits) {
  const std::string path = "models/tinystories-656k/TinyStories-656K-F16.gguf";
  RAPIDE_REQUIRE_SHARED(path);
  LoadedForTest t = load_for_test(shared_path(path));
  ThreadPool pool(2);
  NoOpObserver observer;
  std::vector<std::vector<int32_t>> prompts;
  for (const auto& p : kPrompts) prompts.push_back(t.tokenizer->encode(p, true));
  auto run = [&](bool observed) {
    t.model->set_linear_observer(observed ? &observer : nullptr);
    ContiguousKvStore kv(t.model->config(), static_cast<int>(prompts.size()), 128);
    Batch batch;
    for (size_t s = 0; s < prompts.size(); ++s) {
      for (size_t i = 0; i < prompts[s].size(); ++i) {
        batch.add(prompts[s][i], static_cast<int>(s), static_cast<int>(i), true);
      }
    }
    std::span<const float> prefill = t.model->forward(batch, kv, pool);
    std::vector<float> logits(prefill.begin(), prefill.end());
    batch.clear();
    for (size_t s = 0; s < prompts.size(); ++s) {
      batch.add(static_cast<int32_t>(100 + s), static_cast<int>(s),
                static_cast<int>(prompts[s].size()), true);
    }
    std::span<const float> step = t.model->forward(batch, kv, pool);
    logits.insert(logits.end(), step.begin(), step.end());
    t.model->set_linear_observer(nullptr);
    return logits;
  };
  const std::vector<float> rounded = run(false);
  const std::vector<float> unrounded = run(true);
  EXPECT_GT(observer.calls, 0);
  ASSERT_EQ(rounded.size(), unrounded.size());
  EXPECT_EQ(std::memcmp(rounded.data(), unrounded.data(), rounded.size() * sizeof(float)), 0);
}

}  // namespace
}  // namespace rapide::testing
