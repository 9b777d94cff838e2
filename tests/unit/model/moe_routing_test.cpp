// Top-k routing (model/moe_routing.h): probabilities are a softmax over every expert, the k
// largest are chosen largest first (the lower index on a tie), and their weights are
// renormalised only when asked (Mixtral) and left as probabilities otherwise (Qwen2-MoE);
// DeepSeek's sigmoid scores, selection bias and weight scale.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/ops.h"
#include "model/moe_routing.h"

namespace rapide {
namespace {

TEST(MoeRouting, PicksTheLargestProbabilitiesLargestFirst) {
  std::vector<float> logits = {0.5f, 2.0f, -1.0f, 1.0f};
  int ids[2];
  float weights[2];
  route_token(logits.data(), 4, 2, /*normalize=*/false, ids, weights);
  EXPECT_EQ(ids[0], 1);
  EXPECT_EQ(ids[1], 3);
  double total = 0;
  for (float x : {0.5f, 2.0f, -1.0f, 1.0f}) total += std::exp(x);
  EXPECT_NEAR(weights[0], std::exp(2.0) / total, 1e-6);
  EXPECT_NEAR(weights[1], std::exp(1.0) / total, 1e-6);
}

TEST(MoeRouting, NormalizedWeightsSumToOne) {
  std::vector<float> logits = {0.5f, 2.0f, -1.0f, 1.0f};
  int ids[2];
  float weights[2];
  route_token(logits.data(), 4, 2, /*normalize=*/true, ids, weights);
  EXPECT_NEAR(weights[0] + weights[1], 1.0f, 1e-6f);
  EXPECT_NEAR(weights[0] / weights[1], std::exp(1.0f), 1e-5f);
}

TEST(MoeRouting, TiesGoToTheLowerIndex) {
  std::vector<float> logits = {1.0f, 3.0f, 3.0f, 3.0f};
  int ids[2];
  float weights[2];
  route_token(logits.data(), 4, 2, /*normalize=*/true, ids, weights);
  EXPECT_EQ(ids[0], 1);
  EXPECT_EQ(ids[1], 2);
  EXPECT_FLOAT_EQ(weights[0], 0.5f);
}

double sigmoid(double x) {
  return 1 / (1 + std::exp(-x));
}

// DeepSeek-V3: sigmoid scores, the choice by score + bias, the weights the chosen unbiased
// scores renormalised and scaled (llama.cpp's build_moe_ffn with exp_probs_b).
TEST(MoeRouting, SigmoidScoresWithSelectionBiasAndScale) {
  std::vector<float> logits = {0.5f, 2.0f, -1.0f, 1.0f};
  const float bias[] = {0.0f, 0.0f, 1.5f, 0.0f};  // expert 2: sigmoid(-1) + 1.5 = 1.77, first
  ExpertRouting rule;
  rule.gating = ExpertGating::kSigmoid;
  rule.normalize = true;
  rule.scale = 2.5f;
  rule.selection_bias = bias;
  int ids[2];
  float weights[2];
  route_token(logits.data(), 4, 2, rule, ids, weights);
  EXPECT_EQ(ids[0], 2);
  EXPECT_EQ(ids[1], 1);
  const double s2 = sigmoid(-1.0), s1 = sigmoid(2.0);
  EXPECT_NEAR(weights[0], 2.5 * s2 / (s1 + s2), 1e-6);
  EXPECT_NEAR(weights[1], 2.5 * s1 / (s1 + s2), 1e-6);
  EXPECT_NEAR(logits[3], sigmoid(1.0), 1e-7);  // the scores replace the logits
}

TEST(MoeRouting, SigmoidWeightsWithoutNormalisation) {
  std::vector<float> logits = {0.5f, 2.0f, -1.0f, 1.0f};
  ExpertRouting rule;
  rule.gating = ExpertGating::kSigmoid;
  rule.normalize = false;
  int ids[2];
  float weights[2];
  route_token(logits.data(), 4, 2, rule, ids, weights);
  EXPECT_EQ(ids[0], 1);
  EXPECT_EQ(ids[1], 3);
  EXPECT_NEAR(weights[0], sigmoid(2.0), 1e-6);
  EXPECT_NEAR(weights[1], sigmoid(1.0), 1e-6);
}

// The default rule is the boolean overload's Mixtral routing, bit for bit.
TEST(MoeRouting, DefaultRuleIsTheSoftmaxRouting) {
  std::vector<float> a = {0.3f, -2.0f, 1.7f, 1.1f, 0.2f}, b = a;
  int ids_a[3], ids_b[3];
  float w_a[3], w_b[3];
  route_token(a.data(), 5, 3, /*normalize=*/true, ids_a, w_a);
  route_token(b.data(), 5, 3, ExpertRouting{}, ids_b, w_b);
  for (int s = 0; s < 3; ++s) {
    EXPECT_EQ(ids_a[s], ids_b[s]);
    EXPECT_EQ(w_a[s], w_b[s]);
  }
}

// route_token as it was before DeepSeek's rules joined it (Mixtral / Qwen2-MoE only), kept
// verbatim: the softmax routing must stay bit for bit what it was.
void route_token_before_deepseek(float* logits, int n_experts, int k, bool normalize, int* ids,
                                 float* weights) {
  softmax(logits, n_experts);
  float sum = 0.0f;
  for (int s = 0; s < k; ++s) {
    int best = -1;
    for (int e = 0; e < n_experts; ++e) {
      bool taken = false;
      for (int t = 0; t < s; ++t) taken = taken || ids[t] == e;
      if (!taken && (best < 0 || logits[e] > logits[best])) best = e;
    }
    ids[s] = best;
    weights[s] = logits[best];
    sum += weights[s];
  }
  if (normalize) {
    for (int s = 0; s < k; ++s) weights[s] /= sum;
  }
}

TEST(MoeRouting, SoftmaxRoutingIsBitForBitWhatItWas) {
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 2.0f);
  for (int trial = 0; trial < 2000; ++trial) {
    const int n = 4 + trial % 61, k = 1 + trial % 8;
    std::vector<float> a(n);
    for (float& x : a) x = dist(rng);
    std::vector<float> b = a;
    const bool normalize = trial % 2 == 0;
    std::vector<int> ids_a(k), ids_b(k);
    std::vector<float> w_a(k), w_b(k);
    route_token_before_deepseek(a.data(), n, k, normalize, ids_a.data(), w_a.data());
    route_token(b.data(), n, k, normalize, ids_b.data(), w_b.data());
    ASSERT_EQ(ids_a, ids_b) << "trial " << trial;
    ASSERT_EQ(w_a, w_b) << "trial " << trial;
  }
}

}  // namespace
}  // namespace rapide
