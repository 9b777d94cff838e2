// Each processor of the chain on hand-made logits: exact survivors and probabilities, read
// back through Sampler::last_distribution() and the processed logits row.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <vector>

#include "sampling/sampler.h"

namespace rapide {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// token -> final probability of the distribution the last token was drawn from.
std::map<int32_t, double> distribution(const Sampler& sampler) {
  std::map<int32_t, double> out;
  double total = 0.0;
  for (const Candidate& c : sampler.last_distribution()) {
    out[c.token] = c.prob;
    total += c.prob;
  }
  EXPECT_NEAR(total, 1.0, 1e-6);
  return out;
}

std::map<int32_t, double> sample_distribution(const SamplingParams& params,
                                              std::vector<float> logits,
                                              std::vector<int32_t> history = {}) {
  Sampler sampler(params, static_cast<int>(logits.size()));
  sampler.sample(logits, history);
  return distribution(sampler);
}

std::vector<float> logs(const std::vector<double>& weights) {
  std::vector<float> out;
  for (double w : weights) out.push_back(static_cast<float>(std::log(w)));
  return out;
}

void expect_distribution(const std::map<int32_t, double>& got,
                         const std::map<int32_t, double>& expected) {
  ASSERT_EQ(got.size(), expected.size());
  for (const auto& [token, prob] : expected) {
    ASSERT_TRUE(got.count(token)) << "token " << token << " was dropped";
    EXPECT_NEAR(got.at(token), prob, 1e-6) << "token " << token;
  }
}

TEST(SamplerProcessorsTest, NoProcessorKeepsTheSoftmax) {
  SamplingParams params;
  expect_distribution(sample_distribution(params, logs({1, 2, 3, 4})),
                      {{0, 0.1}, {1, 0.2}, {2, 0.3}, {3, 0.4}});
}

TEST(SamplerProcessorsTest, TopKKeepsTheKBest) {
  SamplingParams params;
  params.top_k = 2;
  const double p1 = 1.0 / (1.0 + std::exp(-1.0));
  expect_distribution(sample_distribution(params, {1, 5, 3, 4, 2}), {{1, p1}, {3, 1.0 - p1}});
}

TEST(SamplerProcessorsTest, TopKTiesPreferLowerIds) {
  SamplingParams params;
  params.top_k = 2;
  expect_distribution(sample_distribution(params, {1, 2, 2, 2, 0}), {{1, 0.5}, {2, 0.5}});
}

TEST(SamplerProcessorsTest, TopKAtLeastVocabIsOff) {
  SamplingParams params;
  params.top_k = 10;
  expect_distribution(sample_distribution(params, logs({1, 1, 2})),
                      {{0, 0.25}, {1, 0.25}, {2, 0.5}});
}

TEST(SamplerProcessorsTest, TopPIncludesTheTokenThatReachesP) {
  // Four equal logits: probabilities are exactly 0.25 each, so cumulative 0.5 == top_p.
  SamplingParams params;
  params.top_p = 0.5f;
  expect_distribution(sample_distribution(params, {0, 0, 0, 0}), {{0, 0.5}, {1, 0.5}});
  params.top_p = 0.5001f;
  expect_distribution(sample_distribution(params, {0, 0, 0, 0}),
                      {{0, 1.0 / 3}, {1, 1.0 / 3}, {2, 1.0 / 3}});
}

// OpenAI accepts top_p 0: the most likely token alone, whatever the temperature.
TEST(SamplerProcessorsTest, TopPZeroKeepsOnlyTheMostLikelyToken) {
  SamplingParams params;
  params.top_p = 0.0f;
  params.temperature = 1.5f;
  EXPECT_NO_THROW(params.validate(4));
  expect_distribution(sample_distribution(params, logs({0.125, 0.5, 0.125, 0.25})), {{1, 1.0}});
  params.top_k = 3;  // top-k cannot widen it
  expect_distribution(sample_distribution(params, logs({0.125, 0.5, 0.125, 0.25})), {{1, 1.0}});
}

TEST(SamplerProcessorsTest, TopPKeepsTheSmallestSufficientSet) {
  // Probabilities 0.5, 0.25, 0.125, 0.125 (given in shuffled token order).
  const std::vector<float> logits = logs({0.125, 0.5, 0.125, 0.25});
  SamplingParams params;
  params.top_p = 0.4f;
  expect_distribution(sample_distribution(params, logits), {{1, 1.0}});
  params.top_p = 0.7f;
  expect_distribution(sample_distribution(params, logits), {{1, 2.0 / 3}, {3, 1.0 / 3}});
  params.top_p = 0.8f;
  expect_distribution(sample_distribution(params, logits),
                      {{0, 0.125 / 0.875}, {1, 0.5 / 0.875}, {3, 0.25 / 0.875}});
}

TEST(SamplerProcessorsTest, TopPNormalizesOverTopKSurvivors) {
  // After top_k = 2 the best token has 2/3 >= 0.6 on its own; over the full vocabulary it
  // would have only 4/8 and top-p would keep two tokens.
  SamplingParams params;
  params.top_k = 2;
  params.top_p = 0.6f;
  expect_distribution(sample_distribution(params, logs({4, 2, 1, 1})), {{0, 1.0}});
}

TEST(SamplerProcessorsTest, MinPIsRelativeToTheBestToken) {
  // Weights 10, 6, 4.9, 1: min_p 0.5 keeps weight >= 5. An absolute threshold
  // (p >= 0.5 of the total 21.9) would keep nothing but the best.
  SamplingParams params;
  params.min_p = 0.5f;
  expect_distribution(sample_distribution(params, logs({10, 6, 4.9, 1})),
                      {{0, 10.0 / 16}, {1, 6.0 / 16}});
  params.min_p = 0.05f;
  expect_distribution(sample_distribution(params, logs({10, 6, 4.9, 0.4})),
                      {{0, 10 / 20.9}, {1, 6 / 20.9}, {2, 4.9 / 20.9}});
}

TEST(SamplerProcessorsTest, MinPAfterTopK) {
  SamplingParams params;
  // top_k keeps weights 10, 8, 6 (sorted); min_p 0.7 then cuts below 7.
  params.top_k = 3;
  params.min_p = 0.7f;
  expect_distribution(sample_distribution(params, logs({1, 10, 6, 4.9, 8})),
                      {{1, 10.0 / 18}, {4, 8.0 / 18}});
}

TEST(SamplerProcessorsTest, TemperatureScalesLogits) {
  SamplingParams params;
  params.temperature = 0.5f;
  const double z_half = 1 + std::exp(2.0) + std::exp(4.0);
  expect_distribution(sample_distribution(params, {0, 1, 2}),
                      {{0, 1 / z_half}, {1, std::exp(2.0) / z_half}, {2, std::exp(4.0) / z_half}});
  params.temperature = 2.0f;
  const double z_two = 1 + std::exp(0.5) + std::exp(1.0);
  expect_distribution(sample_distribution(params, {0, 1, 2}),
                      {{0, 1 / z_two}, {1, std::exp(0.5) / z_two}, {2, std::exp(1.0) / z_two}});
}

TEST(SamplerProcessorsTest, TemperatureRunsAfterTopP) {
  // At temperature 1 top_p 0.7 keeps {0.5, 0.3}. Tempering first (T = 0.25) would make the
  // best token 0.87 alone and keep only it.
  SamplingParams params;
  params.top_p = 0.7f;
  params.temperature = 0.25f;
  const double w0 = std::pow(0.5, 4), w1 = std::pow(0.3, 4);
  expect_distribution(sample_distribution(params, logs({0.5, 0.3, 0.2})),
                      {{0, w0 / (w0 + w1)}, {1, w1 / (w0 + w1)}});
}

TEST(SamplerProcessorsTest, RepetitionPenaltyDividesPositiveMultipliesNegative) {
  SamplingParams params;
  params.temperature = 0.0f;
  params.repetition_penalty = 2.0f;
  Sampler sampler(params, 5);
  std::vector<float> logits = {2.0f, -2.0f, 1.0f, 0.5f, 0.0f};
  const std::vector<int32_t> history = {0, 1, 1, 4};
  EXPECT_EQ(sampler.sample(logits, history).token, 0);  // ties with token 2 at 1.0
  EXPECT_EQ(logits, (std::vector<float>{1.0f, -4.0f, 1.0f, 0.5f, 0.0f}));
}

TEST(SamplerProcessorsTest, PresenceAndFrequencyPenalties) {
  SamplingParams params;
  params.temperature = 0.0f;
  params.presence_penalty = 0.5f;
  params.frequency_penalty = 0.25f;
  Sampler sampler(params, 4);
  std::vector<float> logits = {0.0f, 1.0f, 2.0f, 3.0f};
  sampler.sample(logits, std::vector<int32_t>{2, 2, 3, 2});
  // token 2: 3 occurrences -> 2 - (3 * 0.25 + 0.5); token 3: one -> 3 - (0.25 + 0.5).
  EXPECT_EQ(logits, (std::vector<float>{0.0f, 1.0f, 0.75f, 2.25f}));
}

TEST(SamplerProcessorsTest, AllPenaltiesCombineInLlamaCppOrder) {
  SamplingParams params;
  params.temperature = 0.0f;
  params.repetition_penalty = 1.25f;
  params.presence_penalty = -0.5f;
  params.frequency_penalty = 1.0f;
  Sampler sampler(params, 3);
  std::vector<float> logits = {5.0f, -1.0f, 0.0f};
  sampler.sample(logits, std::vector<int32_t>{0, 0, 1});
  EXPECT_FLOAT_EQ(logits[0], 5.0f / 1.25f - (2.0f - 0.5f));
  EXPECT_FLOAT_EQ(logits[1], -1.0f * 1.25f - (1.0f - 0.5f));
  EXPECT_EQ(logits[2], 0.0f);
}

TEST(SamplerProcessorsTest, PenaltyWindow) {
  SamplingParams params;
  params.temperature = 0.0f;
  params.frequency_penalty = 1.0f;
  const std::vector<int32_t> history = {0, 1, 2, 2};
  auto processed = [&](int32_t last_n) {
    params.penalty_last_n = last_n;
    Sampler sampler(params, 3);
    std::vector<float> logits = {0.0f, 0.0f, 0.0f};
    sampler.sample(logits, history);
    return logits;
  };
  EXPECT_EQ(processed(2), (std::vector<float>{0.0f, 0.0f, -2.0f}));
  EXPECT_EQ(processed(3), (std::vector<float>{0.0f, -1.0f, -2.0f}));
  EXPECT_EQ(processed(-1), (std::vector<float>{-1.0f, -1.0f, -2.0f}));
  EXPECT_EQ(processed(0), (std::vector<float>{0.0f, 0.0f, 0.0f}));
  EXPECT_EQ(processed(100), (std::vector<float>{-1.0f, -1.0f, -2.0f}));
}

TEST(SamplerProcessorsTest, LogitBiasAddsAndBans) {
  SamplingParams params;
  params.temperature = 0.0f;
  params.logit_bias = {{1, 3.0f}, {1, 0.5f}, {0, -kInf}};
  Sampler sampler(params, 3);
  std::vector<float> logits = {10.0f, 1.0f, 4.0f};
  EXPECT_EQ(sampler.sample(logits, {}).token, 1);
  EXPECT_EQ(logits, (std::vector<float>{-kInf, 4.5f, 4.0f}));
}

TEST(SamplerProcessorsTest, BannedTokenLeavesTheDistribution) {
  SamplingParams params;
  params.logit_bias = {{2, -kInf}};
  expect_distribution(sample_distribution(params, logs({1, 3, 100})), {{0, 0.25}, {1, 0.75}});
}

TEST(SamplerProcessorsTest, BiasRunsBeforePenaltiesAndTopK) {
  // The bias lifts token 0 to 3, then the repetition penalty halves it to 1.5; top_k = 1
  // then prefers token 2 (2.0). Bias after penalties would give 1 + 2 = 3 and pick token 0.
  SamplingParams params;
  params.logit_bias = {{0, 2.0f}};
  params.repetition_penalty = 2.0f;
  params.top_k = 1;
  expect_distribution(sample_distribution(params, {1.0f, 0.0f, 2.0f}, {0}), {{2, 1.0}});
}

TEST(SamplerProcessorsTest, IgnoreEosBansEndOfGeneration) {
  SamplingParams params;
  params.temperature = 0.0f;
  params.ignore_eos = true;
  const std::vector<int32_t> eog = {3};
  Sampler sampler(params, 4, eog);
  for (int i = 0; i < 3; ++i) {
    std::vector<float> logits = {0.0f, 1.0f, 0.5f, 9.0f};
    EXPECT_EQ(sampler.sample(logits, {}).token, 1);
  }
}

TEST(SamplerProcessorsTest, MinTokensBansStopsOnlyAtFirst) {
  SamplingParams params;
  params.temperature = 0.0f;
  params.min_tokens = 2;
  params.stop_token_ids = {2};
  const std::vector<int32_t> eog = {3};
  Sampler sampler(params, 4, eog);
  std::vector<int32_t> tokens;
  for (int i = 0; i < 3; ++i) {
    std::vector<float> logits = {0.0f, 1.0f, 8.0f, 9.0f};
    tokens.push_back(sampler.sample(logits, {}).token);
  }
  EXPECT_EQ(tokens, (std::vector<int32_t>{1, 1, 3}));
  EXPECT_EQ(sampler.num_sampled(), 3);
}

}  // namespace
}  // namespace rapide
