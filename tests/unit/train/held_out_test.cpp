// Held-out data of a training run (train/held_out.h): the split keeps the end of the stream
// and shares no position with the training part, holds out at least one window, refuses data
// too short for both sides; the held-out windows start with BOS, are capped and spread over
// the held-out tokens; their loss is the cross-entropy the training loss computes.
#include "train/held_out.h"

#include <gtest/gtest.h>

#include <numeric>
#include <set>

#include "base/error.h"
#include "train/losses.h"
#include "train/token_batches.h"

namespace rapide::train {
namespace {

// Tokens 0..n-1: each token names its position, so overlap shows as a shared value.
std::vector<int32_t> positions(int n) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0);
  return v;
}

TEST(HeldOutSplit, IsTheTailAndDisjointFromTraining) {
  const HeldOutSplit split = split_held_out(positions(1000), 0.2, 16);
  ASSERT_EQ(split.held_out.size(), 200u);
  ASSERT_EQ(split.train.size(), 800u);
  const std::set<int32_t> train(split.train.begin(), split.train.end());
  for (int32_t t : split.held_out) EXPECT_EQ(train.count(t), 0u) << "position " << t;
  EXPECT_EQ(split.train.front(), 0);
  EXPECT_EQ(split.train.back(), 799);
  EXPECT_EQ(split.held_out.front(), 800);  // the end of the stream, in order
  EXPECT_EQ(split.held_out.back(), 999);
  // Every window the training batches draw comes from the training part only.
  const TokenBatches batches(split.train, 16, -1, 7);
  std::vector<int32_t> windows(32 * 17);
  for (int step = 0; step < 50; ++step) {
    batches.fill(step, 0, 32, windows.data());
    for (int32_t t : windows) ASSERT_LT(t, 800);
  }
}

TEST(HeldOutSplit, HoldsOutAtLeastOneWindow) {
  // 5 % of 100 is 5 tokens, fewer than one window of 16 + 1: a whole window is held out.
  const HeldOutSplit split = split_held_out(positions(100), 0.05, 16);
  EXPECT_EQ(split.held_out.size(), 17u);
  EXPECT_EQ(split.train.size(), 83u);
  EXPECT_EQ(split.held_out.front(), 83);
}

TEST(HeldOutSplit, ZeroHoldsOutNothing) {
  const HeldOutSplit split = split_held_out(positions(100), 0.0, 16);
  EXPECT_TRUE(split.held_out.empty());
  EXPECT_EQ(split.train, positions(100));
}

TEST(HeldOutSplit, RefusesDataTooShortForBothSidesAndBadFractions) {
  // 33 tokens: one window of 17 held out leaves 16, less than a training window.
  try {
    split_held_out(positions(33), 0.1, 16);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("--holdout 0"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(split_held_out(positions(34), 0.1, 16));
  EXPECT_THROW(split_held_out(positions(1000), 0.95, 16), Error);
  EXPECT_THROW(split_held_out(positions(1000), -0.1, 16), Error);
}

TEST(HeldOutSet, WindowsStartWithBosAndAreCappedAndSpread) {
  const HeldOutSet small(positions(40), 9, 7);  // 4 windows of 10, the last 0 tokens unused
  ASSERT_EQ(small.windows(), 4);
  EXPECT_EQ(small.scored_tokens(), 36);
  EXPECT_EQ(small.data()[0], 7);    // BOS
  EXPECT_EQ(small.data()[1], 1);    // then the text
  EXPECT_EQ(small.data()[10], 7);   // next window's BOS
  EXPECT_EQ(small.data()[11], 11);  // windows do not overlap
  // 200 windows available: kMaxWindows are scored, spread from the start to the end.
  const HeldOutSet big(positions(200 * 4), 3, -1);
  ASSERT_EQ(big.windows(), HeldOutSet::kMaxWindows);
  EXPECT_EQ(big.data().front(), 0);
  EXPECT_GT(big.data()[(HeldOutSet::kMaxWindows - 1) * 4], 600);
  EXPECT_THROW(HeldOutSet(positions(9), 9, -1), Error);
}

TEST(HeldOutSet, LossIsTheCrossEntropyOfEveryPosition) {
  TrainShape s;
  s.dim = 16;
  s.layers = 1;
  s.heads = 2;
  s.kv_heads = 1;
  s.head_dim = 8;
  s.ffn = 32;
  s.vocab = 64;
  s.ctx = 16;
  TrainModel model = TrainModel::random(s, 3);
  std::vector<int32_t> tokens(3 * 9);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>((i * 7) % 64);
  const HeldOutSet set(tokens, 8, -1);
  ASSERT_EQ(set.windows(), 3);
  // The reference: the training loss's cross-entropy on all three windows at once.
  std::vector<int32_t> inputs, targets;
  for (int w = 0; w < 3; ++w) {
    inputs.insert(inputs.end(), tokens.begin() + w * 9, tokens.begin() + w * 9 + 8);
    targets.insert(targets.end(), tokens.begin() + w * 9 + 1, tokens.begin() + w * 9 + 9);
  }
  const std::span<const float> logits = model.forward(inputs.data(), 3, 8);
  std::vector<float> dlogits(logits.size());
  const double expected =
      cross_entropy(logits.data(), 24, 64, targets.data(), 1.0f, dlogits.data());
  EXPECT_NEAR(set.loss(model, 2), expected, 1e-6);  // batches of 2, then 1
  EXPECT_NEAR(set.loss(model, 8), expected, 1e-6);
}

}  // namespace
}  // namespace rapide::train
