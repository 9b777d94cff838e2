// Structured pruning on a random tiny model in which some structures contribute nothing (their
// output weights are zero): both scores must rank exactly those last, and removing them must
// leave the logits unchanged (an oracle independent of the scores: a zero contribution
// removed is no change). Also the shapes of the smaller model.
#include "train/pruning.h"

#include <gtest/gtest.h>

#include <random>

#include "base/error.h"
#include "train/losses.h"

namespace rapide::train {
namespace {

TrainShape shape() {
  TrainShape s;
  s.dim = 16;
  s.layers = 3;
  s.heads = 4;
  s.kv_heads = 2;
  s.head_dim = 4;
  s.ffn = 8;
  s.vocab = 13;
  s.ctx = 8;
  return s;
}

const std::vector<int32_t> kTokens = {1, 5, 9, 2, 7, 3, 11, 0};

// A random model in which FFN channels 2 and 5 of every layer, KV group 1 of every layer and
// all of layer 1 contribute nothing.
TrainModel model_with_dead_parts() {
  TrainModel m = TrainModel::random(shape(), 3);
  const TrainShape& s = m.shape();
  std::mt19937_64 rng(5);
  std::normal_distribution<float> normal(0.0f, 0.3f);
  for (float& w : m.params()) w = w == 1.0f ? w : normal(rng);  // larger weights than init
  for (int l = 0; l < s.layers; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    float* down = m.data(b + "ffn_down.weight");   // dim rows of ffn
    float* wo = m.data(b + "attn_output.weight");  // dim rows of q_dim
    for (int r = 0; r < s.dim; ++r) {
      for (int j : {2, 5}) down[r * s.ffn + j] = 0.0f;
      for (int c = 8; c < 16; ++c) wo[r * s.q_dim() + c] = 0.0f;  // heads 2, 3 = group 1
      if (l == 1) {
        for (int j = 0; j < s.ffn; ++j) down[r * s.ffn + j] = 0.0f;
        for (int c = 0; c < s.q_dim(); ++c) wo[r * s.q_dim() + c] = 0.0f;
      }
    }
  }
  return m;
}

std::vector<float> logits(TrainModel& m) {
  const auto out = m.forward(kTokens.data(), 1, static_cast<int>(kTokens.size()));
  return {out.begin(), out.end()};
}

void expect_dead_parts_removed(TrainModel& model, const StructureScores& scores) {
  const PrunePlan plan =
      plan_pruning(model.shape(), scores,
                   PruneOptions{.ffn = 0.25, .heads = 0.5, .layers = 1, .multiple_of = 1});
  EXPECT_EQ(plan.keep_layers, (std::vector<int>{0, 2}));
  for (size_t i = 0; i < plan.keep_layers.size(); ++i) {
    EXPECT_EQ(plan.keep_ffn[i], (std::vector<int>{0, 1, 3, 4, 6, 7}));
    EXPECT_EQ(plan.keep_kv_groups[i], (std::vector<int>{0}));
  }
  TrainModel pruned = apply_pruning(model, plan);
  const TrainShape& s = pruned.shape();
  EXPECT_EQ(s.layers, 2);
  EXPECT_EQ(s.ffn, 6);
  EXPECT_EQ(s.kv_heads, 1);
  EXPECT_EQ(s.heads, 2);
  EXPECT_EQ(s.head_dim, 4);
  EXPECT_EQ(pruned.tensor("blk.1.attn_q.weight").shape, (std::vector<int64_t>{16, 8}));
  EXPECT_EQ(pruned.tensor("blk.1.attn_output.weight").shape, (std::vector<int64_t>{8, 16}));
  EXPECT_EQ(pruned.tensor("blk.1.ffn_down.weight").shape, (std::vector<int64_t>{6, 16}));
  const std::vector<float> before = logits(model), after = logits(pruned);
  ASSERT_EQ(before.size(), after.size());
  for (size_t i = 0; i < before.size(); ++i) EXPECT_NEAR(before[i], after[i], 1e-4) << i;
}

TEST(Pruning, MagnitudeScoresRemoveWhatContributesNothing) {
  TrainModel model = model_with_dead_parts();
  const TrainShape& s = model.shape();
  ActivationNorms norms(s.layers);
  // Inputs of equal norm on every channel: the weights decide.
  const std::vector<float> ones(static_cast<size_t>(s.ffn * s.q_dim()), 1.0f);
  for (int l = 0; l < s.layers; ++l) {
    norms.observe(l, LinearInput::kAttnOut, ones.data(), 1, s.q_dim());
    norms.observe(l, LinearInput::kFfnDown, ones.data(), 1, s.ffn);
  }
  StructureScores scores = magnitude_scores(model, norms);
  logits(model);
  add_block_influence(model, static_cast<int64_t>(kTokens.size()), scores.layers);
  EXPECT_NEAR(scores.layers[1], 0.0, 1e-5);  // layer 1 adds nothing to the residual
  expect_dead_parts_removed(model, scores);
}

TEST(Pruning, TaylorScoresRemoveWhatContributesNothing) {
  TrainModel model = model_with_dead_parts();
  const std::vector<float> out = logits(model);
  std::vector<int32_t> targets(kTokens.begin() + 1, kTokens.end());
  targets.push_back(4);
  std::vector<float> dlogits(out.size());
  cross_entropy(out.data(), static_cast<int64_t>(kTokens.size()), model.shape().vocab,
                targets.data(), 1.0f, dlogits.data());
  std::fill(model.grads().begin(), model.grads().end(), 0.0f);
  model.backward(dlogits.data());
  StructureScores scores = taylor_scores(model);
  add_block_influence(model, static_cast<int64_t>(kTokens.size()), scores.layers);
  EXPECT_EQ(scores.ffn[0][2], 0.0);
  EXPECT_GT(scores.ffn[0][1], 0.0);
  expect_dead_parts_removed(model, scores);
}

TEST(Pruning, PlanRoundsTheKeptWidthAndRefusesBadFractions) {
  TrainShape s = shape();
  s.ffn = 384;
  s.layers = 1;
  StructureScores scores;
  scores.ffn.assign(1, std::vector<double>(384, 1.0));
  scores.kv_groups.assign(1, std::vector<double>(2, 1.0));
  EXPECT_EQ(plan_pruning(s, scores, {.ffn = 0.3, .multiple_of = 16}).keep_ffn[0].size(), 272u);
  EXPECT_EQ(plan_pruning(s, scores, {.ffn = 0.3, .multiple_of = 1}).keep_ffn[0].size(), 269u);
  EXPECT_EQ(plan_pruning(s, scores, {}).keep_ffn[0].size(), 384u);
  EXPECT_THROW(plan_pruning(s, scores, {.ffn = 1.0}), Error);
  EXPECT_THROW(plan_pruning(s, scores, {.heads = -0.1}), Error);
  EXPECT_THROW(plan_pruning(s, scores, {.layers = 1}), Error);
}

}  // namespace
}  // namespace rapide::train
