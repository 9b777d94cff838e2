// One model, three files: TinyStories-656K as GGUF F16, Hugging Face F32 and HF BF16 must
// compute the same thing up to the precision each carries, and stories260K as GGUF and as
// llama2.c checkpoints (legacy and v1) exactly the same.
#include <gtest/gtest.h>

#include <cmath>

#include "golden/greedy_runner.h"
#include "test_paths.h"

namespace rapide::testing {
namespace {

std::vector<float> first_logits(LoadedForTest& t, const std::vector<int32_t>& prompt,
                                ThreadPool& pool) {
  ContiguousKvStore kv(t.model->config(), 1, 64);
  Batch batch;
  for (size_t p = 0; p < prompt.size(); ++p) batch.add(prompt[p], 0, static_cast<int>(p), true);
  auto logits = t.model->forward(batch, kv, pool);
  return {logits.begin(), logits.end()};
}

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float m = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

// Greedy runs agree until the first step where one of them is a near-tie.
void expect_same_until_near_tie(const GreedyResult& a, const GreedyResult& b, float max_margin,
                                const char* what) {
  for (size_t i = 0; i < a.tokens.size() && i < b.tokens.size(); ++i) {
    if (a.tokens[i] == b.tokens[i]) continue;
    EXPECT_LT(std::min(a.steps[i].margin, b.steps[i].margin), max_margin)
        << what << ": token " << i << " differs without a near-tie";
    return;
  }
}

TEST(ModelFormatsAgree, TinyStoriesGgufF16VsHfF32VsHfBf16) {
  RAPIDE_REQUIRE_SHARED("models/tinystories-656k");
  ThreadPool pool(2);
  auto gguf = load_for_test(shared_path("models/tinystories-656k/TinyStories-656K-F16.gguf"));
  auto hf32 = load_for_test(shared_path("models/tinystories-656k/hf"));
  auto hf16 = load_for_test(shared_path("models/tinystories-656k/hf-bf16"));
  const auto prompt = gguf.tokenizer->encode("Once upon a time, there was a", true);
  EXPECT_EQ(prompt, hf32.tokenizer->encode("Once upon a time, there was a", true));
  EXPECT_EQ(prompt, hf16.tokenizer->encode("Once upon a time, there was a", true));

  const auto l16 = first_logits(gguf, prompt, pool);
  const auto l32 = first_logits(hf32, prompt, pool);
  const auto lbf = first_logits(hf16, prompt, pool);
  // F16 weights and activations vs F32: logits agree to a few hundredths; BF16 carries
  // 8 bits of mantissa, so an order of magnitude looser.
  EXPECT_LT(max_abs_diff(l16, l32), 0.05f);
  EXPECT_LT(max_abs_diff(lbf, l32), 0.5f);

  auto g16 = greedy(*gguf.model, prompt, 64, pool);
  auto g32 = greedy(*hf32.model, prompt, 64, pool);
  auto gbf = greedy(*hf16.model, prompt, 64, pool);
  expect_same_until_near_tie(g16, g32, 0.1f, "GGUF F16 vs HF F32");
  expect_same_until_near_tie(gbf, g32, 0.5f, "HF BF16 vs HF F32");
}

TEST(ModelFormatsAgree, Stories260KGgufVsLlama2cLegacyVsV1) {
  RAPIDE_REQUIRE_SHARED("models/stories260K");
  ThreadPool pool(2);
  LoadOptions tok;
  tok.tokenizer_path = shared_path("models/stories260K/tok512.bin");
  auto gguf = load_for_test(shared_path("models/stories260K/stories260K.gguf"));
  auto legacy = load_for_test(shared_path("models/stories260K/stories260K.bin"), tok);
  auto v1 = load_for_test(shared_path("models/stories260K/stories260K-v1.bin"), tok);
  const auto prompt = gguf.tokenizer->encode("Once upon a time", true);
  ASSERT_EQ(prompt, legacy.tokenizer->encode("Once upon a time", true));
  const auto a = greedy(*gguf.model, prompt, 100, pool);
  EXPECT_EQ(a.tokens, greedy(*legacy.model, prompt, 100, pool).tokens);
  EXPECT_EQ(a.tokens, greedy(*v1.model, prompt, 100, pool).tokens);
}

}  // namespace
}  // namespace rapide::testing
