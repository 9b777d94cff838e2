// Sampler: greedy, seeded determinism, batch invariance, the statistics of the draw, and
// the reported logprobs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "base/error.h"
#include "sampling/sampler.h"

namespace rapide {
namespace {

std::vector<float> random_logits(int vocab, uint64_t seed, float scale = 3.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> logits(static_cast<size_t>(vocab));
  for (float& l : logits) l = normal(rng);
  return logits;
}

// Samples `steps` tokens, each from a fresh copy of the same logits.
std::vector<int32_t> sample_many(Sampler& sampler, const std::vector<float>& logits, int steps) {
  std::vector<int32_t> tokens;
  for (int i = 0; i < steps; ++i) {
    std::vector<float> row = logits;
    tokens.push_back(sampler.sample(row, {}).token);
  }
  return tokens;
}

// log_softmax computed independently in long double.
std::vector<double> log_softmax(const std::vector<float>& logits) {
  long double max = -INFINITY;
  for (float l : logits) max = std::max<long double>(max, l);
  long double sum = 0;
  for (float l : logits) sum += std::exp(static_cast<long double>(l) - max);
  std::vector<double> out;
  for (float l : logits) out.push_back(static_cast<double>(l - max - std::log(sum)));
  return out;
}

TEST(SamplerTest, GreedyPicksArgmax) {
  SamplingParams params;
  params.temperature = 0.0f;
  Sampler sampler(params, 5);
  std::vector<float> logits = {0.1f, 2.0f, -1.0f, 1.9f, 1.99f};
  const SampleResult result = sampler.sample(logits, {});
  EXPECT_EQ(result.token, 1);
  EXPECT_EQ(result.logprob, 0.0f);
  ASSERT_EQ(sampler.last_distribution().size(), 1u);
  EXPECT_EQ(sampler.last_distribution()[0].token, 1);
  EXPECT_EQ(sampler.last_distribution()[0].prob, 1.0f);
}

TEST(SamplerTest, GreedyTiesGoToLowestId) {
  SamplingParams params;
  params.temperature = 0.0f;
  Sampler sampler(params, 6);
  std::vector<float> logits = {1.0f, 2.0f, 3.0f, 0.0f, 3.0f, 3.0f};
  EXPECT_EQ(sampler.sample(logits, {}).token, 2);
  std::vector<float> all_equal(6, -0.5f);
  EXPECT_EQ(sampler.sample(all_equal, {}).token, 0);
}

TEST(SamplerTest, GreedyIsUnaffectedBySeed) {
  const std::vector<float> logits = random_logits(1000, 3);
  SamplingParams a;
  a.temperature = 0.0f;
  SamplingParams b = a;
  b.seed = 12345;
  Sampler sa(a, 1000);
  Sampler sb(b, 1000);
  const auto expected =
      static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  EXPECT_EQ(sample_many(sa, logits, 10), std::vector<int32_t>(10, expected));
  EXPECT_EQ(sample_many(sb, logits, 10), std::vector<int32_t>(10, expected));
}

TEST(SamplerTest, TinyTemperatureIsGreedy) {
  SamplingParams params;
  params.temperature = 1e-30f;
  Sampler sampler(params, 4);
  for (int i = 0; i < 5; ++i) {
    std::vector<float> logits = {0.0f, 1.0f, 1.0f, 0.5f};
    EXPECT_EQ(sampler.sample(logits, {}).token, 1);
  }
}

TEST(SamplerTest, SameSeedSameSequenceDifferentSeedDifferent) {
  const std::vector<float> logits = random_logits(1000, 1, 1.0f);
  SamplingParams params;
  params.seed = 42;
  Sampler first(params, 1000);
  Sampler second(params, 1000);
  params.seed = 43;
  Sampler other(params, 1000);
  const std::vector<int32_t> a = sample_many(first, logits, 200);
  EXPECT_EQ(a, sample_many(second, logits, 200));
  EXPECT_NE(a, sample_many(other, logits, 200));
  // A flat-ish distribution over 1000 tokens: the draws must actually vary.
  EXPECT_GT(std::count_if(a.begin() + 1, a.end(), [&](int32_t t) { return t != a[0]; }), 150);
}

TEST(SamplerTest, DrawIsInverseCdfOfOneUniformPerCall) {
  // Pins the seeded stream to its definition: u = top 53 bits of mt19937_64(seed) / 2^53,
  // token = first i with u < cdf(i), token order. Changing this changes every seeded output.
  const std::vector<float> probs = {0.1f, 0.2f, 0.3f, 0.4f};
  std::vector<float> logits;
  for (float p : probs) logits.push_back(std::log(p));
  SamplingParams params;
  params.seed = 7;
  Sampler sampler(params, 4);
  std::mt19937_64 reference(7);
  for (int step = 0; step < 50; ++step) {
    const double u = static_cast<double>(reference() >> 11) * 0x1.0p-53;
    int32_t expected = 3;
    bool near_boundary = false;  // float rounding may legitimately go either way there
    double cdf = 0.0;
    for (int32_t i = 0; i < 4; ++i) {
      cdf += probs[static_cast<size_t>(i)];
      near_boundary = near_boundary || std::abs(u - cdf) < 1e-6;
      if (u < cdf) {
        expected = i;
        break;
      }
    }
    std::vector<float> row = logits;
    const int32_t token = sampler.sample(row, {}).token;
    if (!near_boundary) {
      EXPECT_EQ(token, expected) << "step " << step << " u=" << u;
    }
  }
}

TEST(SamplerTest, BatchInvariance) {
  // A sequence's tokens must not depend on other sequences sampled in between.
  const std::vector<float> mine = random_logits(500, 10, 1.0f);
  const std::vector<float> theirs = random_logits(500, 11, 1.0f);
  SamplingParams params;
  params.seed = 99;
  params.top_k = 50;
  Sampler alone(params, 500);
  const std::vector<int32_t> expected = sample_many(alone, mine, 100);

  Sampler me(params, 500);
  SamplingParams other_params = params;  // same seed on purpose: still independent streams
  Sampler neighbour(other_params, 500);
  std::vector<int32_t> got;
  for (int i = 0; i < 100; ++i) {
    std::vector<float> row = theirs;
    for (int j = 0; j <= i % 3; ++j) neighbour.sample(row, {});
    row = mine;
    got.push_back(me.sample(row, {}).token);
  }
  EXPECT_EQ(got, expected);
}

TEST(SamplerTest, DrawsFollowTheDistribution) {
  // Chi-square goodness of fit with a fixed seed: deterministic, and a wrong CDF walk,
  // missing temperature or an off-by-one token shift pushes the statistic far above the
  // 0.1% critical value.
  const std::vector<double> expected_probs = {0.05, 0.15, 0.3, 0.5};
  std::vector<float> logits;
  for (double p : expected_probs) logits.push_back(static_cast<float>(2.0 * std::log(p)));
  SamplingParams params;
  params.temperature = 2.0f;  // exp(2 log p / 2) = p
  params.seed = 2024;
  Sampler sampler(params, 4);
  constexpr int kDraws = 40000;
  std::vector<int> counts(4, 0);
  for (int i = 0; i < kDraws; ++i) {
    std::vector<float> row = logits;
    ++counts[static_cast<size_t>(sampler.sample(row, {}).token)];
  }
  double chi2 = 0.0;
  for (size_t i = 0; i < 4; ++i) {
    const double e = expected_probs[i] * kDraws;
    chi2 += (counts[i] - e) * (counts[i] - e) / e;
  }
  EXPECT_LT(chi2, 16.27) << counts[0] << " " << counts[1] << " " << counts[2] << " " << counts[3];
}

TEST(SamplerTest, TruncatedTokensAreNeverDrawn) {
  const std::vector<float> logits = {1.0f, 0.9f, 0.8f, 0.7f, 3.0f, 2.9f};
  SamplingParams params;
  params.top_k = 2;
  params.seed = 5;
  Sampler sampler(params, 6);
  std::vector<int> counts(6, 0);
  for (int32_t t : sample_many(sampler, logits, 2000)) ++counts[static_cast<size_t>(t)];
  EXPECT_EQ(counts[0] + counts[1] + counts[2] + counts[3], 0);
  EXPECT_GT(counts[4], 900);  // p = 1/(1+e^-0.1) = 0.525
  EXPECT_GT(counts[5], 800);
}

TEST(SamplerTest, LogprobIsUnderTheFinalDistribution) {
  const std::vector<float> logits = {0.0f, 1.0f, 2.0f, 3.0f};
  SamplingParams params;
  params.top_k = 2;
  params.temperature = 0.5f;
  Sampler sampler(params, 4);
  for (int i = 0; i < 20; ++i) {
    std::vector<float> row = logits;
    const SampleResult result = sampler.sample(row, {});
    // Survivors 3 and 2 with weights e^(2*3), e^(2*2).
    const double p3 = 1.0 / (1.0 + std::exp(-2.0));
    const double expected = result.token == 3 ? std::log(p3) : std::log(1.0 - p3);
    ASSERT_TRUE(result.token == 2 || result.token == 3);
    EXPECT_NEAR(result.logprob, expected, 1e-6);
  }
}

TEST(SamplerTest, RawLogprobsAndAlternativesAreConsistent) {
  const std::vector<float> logits = random_logits(3000, 8);
  const std::vector<double> reference = log_softmax(logits);
  SamplingParams params;
  params.top_logprobs = 5;
  params.top_k = 40;
  params.repetition_penalty = 1.3f;
  params.logit_bias = {{7, 4.0f}};
  params.seed = 3;
  Sampler sampler(params, 3000);
  std::vector<int32_t> history;
  for (int step = 0; step < 30; ++step) {
    std::vector<float> row = logits;
    const SampleResult result = sampler.sample(row, history);
    // The raw logprob ignores bias and penalties, even for tokens they changed.
    EXPECT_NEAR(result.raw_logprob, reference[static_cast<size_t>(result.token)], 1e-5);
    ASSERT_EQ(result.top_logprobs.size(), 5u);
    std::vector<int32_t> order(logits.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
    std::partial_sort(order.begin(), order.begin() + 5, order.end(),
                      [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
    for (size_t i = 0; i < 5; ++i) {
      EXPECT_EQ(result.top_logprobs[i].token, order[i]);
      EXPECT_NEAR(result.top_logprobs[i].logprob, reference[static_cast<size_t>(order[i])], 1e-5);
      EXPECT_LE(result.top_logprobs[i].logprob, 0.0f);
    }
    history.push_back(result.token);
    history.push_back(7);
  }
}

TEST(SamplerTest, AlternativeTiesGoToLowerIdsAndNProbsExceedsTwenty) {
  std::vector<float> logits(100, 0.0f);
  logits[50] = 1.0f;
  SamplingParams params;
  params.temperature = 0.0f;
  params.n_probs = 30;
  Sampler sampler(params, 100);
  const SampleResult result = sampler.sample(logits, {});
  ASSERT_EQ(result.top_logprobs.size(), 30u);
  EXPECT_EQ(result.top_logprobs[0].token, 50);
  for (int32_t i = 1; i < 30; ++i) EXPECT_EQ(result.top_logprobs[i].token, i - 1);
  // All 100 raw probabilities sum to one: e/(e+99) + 99/(e+99).
  const double z = std::exp(1.0) + 99.0;
  EXPECT_NEAR(result.raw_logprob, 1.0 - std::log(z), 1e-6);
  EXPECT_NEAR(result.top_logprobs[1].logprob, -std::log(z), 1e-6);
}

TEST(SamplerTest, NoLogprobsUnlessAsked) {
  SamplingParams params;
  Sampler sampler(params, 10);
  std::vector<float> logits = random_logits(10, 1);
  const SampleResult result = sampler.sample(logits, {});
  EXPECT_TRUE(std::isnan(result.raw_logprob));
  EXPECT_TRUE(result.top_logprobs.empty());
}

TEST(SamplerTest, RejectsBadInputs) {
  SamplingParams params;
  Sampler sampler(params, 4);
  std::vector<float> short_row(3, 0.0f);
  EXPECT_THROW(sampler.sample(short_row, {}), Error);
  std::vector<float> nan_row = {0.0f, std::nanf(""), 1.0f, 2.0f};
  try {
    sampler.sample(nan_row, {});
    FAIL() << "NaN logits accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInternal);
  }
  params.top_k = -3;
  EXPECT_THROW(Sampler(params, 4), Error);
  SamplingParams ok;
  EXPECT_THROW(Sampler(ok, 4, std::vector<int32_t>{4}), Error);
}

TEST(SamplerTest, BanningEveryTokenIsAnError) {
  SamplingParams params;
  const float inf = std::numeric_limits<float>::infinity();
  params.logit_bias = {{0, -inf}, {1, -inf}};
  Sampler sampler(params, 2);
  std::vector<float> logits = {1.0f, 2.0f};
  EXPECT_THROW(sampler.sample(logits, {}), Error);
  params.temperature = 0.0f;
  Sampler greedy(params, 2);
  logits = {1.0f, 2.0f};
  EXPECT_THROW(greedy.sample(logits, {}), Error);
}

}  // namespace
}  // namespace rapide
