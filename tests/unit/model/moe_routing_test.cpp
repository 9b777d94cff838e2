// Top-k routing (model/moe_routing.h): probabilities are a softmax over every expert, the k
// largest are chosen largest first (the lower index on a tie), and their weights are
// renormalised only when asked (Mixtral) and left as probabilities otherwise (Qwen2-MoE).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

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

}  // namespace
}  // namespace rapide
