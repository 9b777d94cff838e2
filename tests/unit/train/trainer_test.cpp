// The training loop end to end on a tiny character-level model: it overfits a tiny text
// (the loss falls from log(vocab) to below a bound), AdamW's schedule has its shape, a run
// killed after a checkpoint and resumed gives the uninterrupted run's loss curve, and with
// held-out text a run built to overfit stops early and hands back its best weights.
#include "train/trainer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>

#include "base/error.h"
#include "train/checkpoint.h"

namespace rapide::train {
namespace {

const std::string kText =
    "once upon a time there was a little cat. the cat liked to sit on the mat. "
    "one day the cat saw a dog. the dog sat on the log. they were happy friends. ";

// Characters as tokens: 'a'..'z' -> 1..26, ' ' -> 27, '.' -> 28.
std::vector<int32_t> char_tokens(const std::string& text) {
  std::vector<int32_t> out;
  for (char c : text) out.push_back(c == ' ' ? 27 : c == '.' ? 28 : c - 'a' + 1);
  return out;
}

TrainShape char_shape() {
  TrainShape s;
  s.dim = 32;
  s.layers = 2;
  s.heads = 4;
  s.kv_heads = 2;
  s.head_dim = 8;
  s.ffn = 64;
  s.vocab = 32;
  s.ctx = 32;
  return s;
}

TrainOptions quiet_options(int64_t steps) {
  TrainOptions o;
  o.steps = steps;
  o.batch = 8;
  o.adamw.lr = 1e-2f;
  o.adamw.min_lr = 1e-3f;
  o.adamw.warmup_steps = 10;
  o.adamw.weight_decay = 0.0f;
  o.progress = false;
  return o;
}

TEST(Trainer, TinyModelOverfitsATinyText) {
  TrainModel model = TrainModel::random(char_shape(), 1);
  const TokenBatches data(char_tokens(kText), 24, -1, 3);
  CrossEntropyObjective ce;
  TrainOptions o = quiet_options(200);
  o.accumulate = 2;
  const TrainResult r = train(model, data, ce, o);
  ASSERT_EQ(r.losses.size(), 200u);
  EXPECT_NEAR(r.losses.front(), std::log(32.0), 0.3);  // untrained: about uniform
  EXPECT_LT(r.losses.back(), 0.5);                     // the text is learnt by heart
  EXPECT_EQ(r.tokens, 200 * 2 * 8 * 24);
}

TEST(Trainer, ScheduleWarmsUpThenDecaysToTheMinimum) {
  AdamWOptions o;
  o.lr = 1.0f;
  o.min_lr = 0.1f;
  o.warmup_steps = 4;
  EXPECT_FLOAT_EQ(scheduled_lr(o, 0, 20), 0.25f);
  EXPECT_FLOAT_EQ(scheduled_lr(o, 3, 20), 1.0f);
  EXPECT_FLOAT_EQ(scheduled_lr(o, 4, 20), 1.0f);
  EXPECT_NEAR(scheduled_lr(o, 19, 20), 0.1f, 1e-6);
  EXPECT_LT(scheduled_lr(o, 12, 20), scheduled_lr(o, 8, 20));
}

TEST(Trainer, ResumedRunRepeatsTheUninterruptedLossCurve) {
  const TokenBatches data(char_tokens(kText), 16, -1, 5);
  CrossEntropyObjective ce;
  TrainModel uninterrupted = TrainModel::random(char_shape(), 2);
  const TrainResult full = train(uninterrupted, data, ce, quiet_options(12));

  const std::string path =
      (std::filesystem::temp_directory_path() / "rapide_trainer_test.ckpt").string();
  std::filesystem::remove(path);
  TrainOptions first = quiet_options(12);
  first.checkpoint = path;
  first.checkpoint_every = 3;
  first.stop_after = 7;  // killed after step 7 (0-based): the last checkpoint is after step 5
  TrainModel killed = TrainModel::random(char_shape(), 2);
  const TrainResult before = train(killed, data, ce, first);
  ASSERT_EQ(before.losses.size(), 8u);

  TrainModel resumed = TrainModel::random(char_shape(), 99);  // weights come from the file
  TrainOptions again = quiet_options(12);
  again.checkpoint = path;
  const TrainResult after = train(resumed, data, ce, again);
  EXPECT_EQ(after.first_step, 6);
  ASSERT_EQ(after.losses.size(), 6u);
  for (size_t i = 0; i < after.losses.size(); ++i) {
    EXPECT_EQ(after.losses[i], full.losses[6 + i]) << "step " << 6 + i;
  }
  EXPECT_EQ(resumed.params(), uninterrupted.params());

  // A checkpoint of another shape is refused.
  TrainShape other = char_shape();
  other.ffn = 48;
  TrainModel wrong(other);
  AdamW optimizer(AdamWOptions{}, wrong.parameter_count());
  EXPECT_THROW(load_checkpoint(path, wrong, optimizer), Error);
  std::filesystem::remove(path);
}

// Text the model never trains on: other sentences of the same characters.
const std::string kOtherText =
    "a big dog ran to the tree. the bird sang a song in the sun. the boy and his mom went "
    "to the park to play on the slide. it was a fun day for all of them at the park. ";

TEST(Trainer, OverfittingRunStopsEarlyWithItsBestWeights) {
  // 200 steps at a high rate on 150 characters: the training text is learnt by heart and the
  // held-out loss, after falling while the model learns which characters are common, rises.
  const TokenBatches data(char_tokens(kText), 24, -1, 3);
  const HeldOutSet held_out(char_tokens(kOtherText), 24, -1);
  CrossEntropyObjective ce;
  TrainOptions o = quiet_options(200);
  o.held_out = &held_out;
  o.eval_every = 5;
  o.patience = 3;
  TrainModel model = TrainModel::random(char_shape(), 1);
  const TrainResult r = train(model, data, ce, o);

  EXPECT_TRUE(r.stopped_early);
  EXPECT_LT(r.losses.size(), 200u);
  ASSERT_GE(r.held_out.size(), 5u);
  EXPECT_EQ(r.held_out.front().step, 0);
  EXPECT_EQ(r.held_out.back().step, static_cast<int64_t>(r.losses.size()));
  EXPECT_TRUE(r.kept_earlier());
  // The patience ran out: the last `patience` scores are all worse than the best.
  for (size_t i = r.held_out.size() - 3; i < r.held_out.size(); ++i) {
    EXPECT_GE(r.held_out[i].loss, r.best.loss);
  }
  double lowest = r.held_out.front().loss;
  for (const HeldOutScore& s : r.held_out) lowest = std::min(lowest, s.loss);
  EXPECT_EQ(r.best.loss, lowest);
  EXPECT_GT(r.best.step, 0);                        // training helped at first
  EXPECT_LT(r.best.loss, r.held_out.front().loss);  // ... and the model kept that
  // The weights handed back are the best score's: scoring them again gives its loss.
  EXPECT_EQ(held_out.loss(model, o.batch), r.best.loss);
  EXPECT_LT(held_out.loss(model, o.batch), r.held_out.back().loss);
}

TEST(Trainer, WithoutPatienceTheRunGoesOnAndStillKeepsTheBest) {
  const TokenBatches data(char_tokens(kText), 24, -1, 3);
  const HeldOutSet held_out(char_tokens(kOtherText), 24, -1);
  CrossEntropyObjective ce;
  TrainOptions o = quiet_options(120);
  o.held_out = &held_out;
  o.eval_every = 10;
  o.patience = 0;
  TrainModel model = TrainModel::random(char_shape(), 1);
  const TrainResult r = train(model, data, ce, o);
  EXPECT_FALSE(r.stopped_early);
  EXPECT_EQ(r.losses.size(), 120u);
  ASSERT_EQ(r.held_out.size(), 13u);  // before, then every 10 steps
  EXPECT_EQ(r.held_out.back().step, 120);
  EXPECT_TRUE(r.kept_earlier());
  EXPECT_EQ(held_out.loss(model, o.batch), r.best.loss);
}

}  // namespace
}  // namespace rapide::train
