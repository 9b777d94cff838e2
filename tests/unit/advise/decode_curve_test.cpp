// The decode curve (advise/decode_curve.h) and the row sweep that measures it
// (advise/decode_row_sweep.h) on a real model.
#include "advise/decode_curve.h"

#include <gtest/gtest.h>

#include "advise/decode_row_sweep.h"
#include "base/error.h"
#include "base/thread_pool.h"
#include "formats/model_file.h"
#include "model/model.h"
#include "test_paths.h"

namespace rapide::advise {
namespace {

DecodeCurve curve() {
  return {64, {{1, 0.010}, {4, 0.013}, {16, 0.040}}};
}

TEST(DecodeCurve, InterpolatesBetweenMeasuredRows) {
  const DecodeCurve c = curve();
  EXPECT_DOUBLE_EQ(c.at(1), 0.010);
  EXPECT_DOUBLE_EQ(c.at(4), 0.013);
  EXPECT_NEAR(c.at(2.5), 0.0115, 1e-12);
  EXPECT_NEAR(c.at(10), 0.013 + 6 * 0.027 / 12, 1e-12);
}

TEST(DecodeCurve, ContinuesAlongTheLastSegmentBeyondIt) {
  // 16 -> 32 rows: the 4 -> 16 slope (2.25 ms a row), not the average of all points.
  EXPECT_NEAR(curve().at(32), 0.040 + 16 * 0.027 / 12, 1e-12);
}

TEST(DecodeCurve, NeverFallsBelowTheFirstPointForMoreRows) {
  // Noise made 4 rows cheaper than 1: a step of 3 rows still costs at least one of 1.
  const DecodeCurve noisy{64, {{1, 0.010}, {4, 0.008}, {8, 0.012}}};
  EXPECT_DOUBLE_EQ(noisy.at(3), 0.010);
}

TEST(DecodeCurve, RatioScalesAMeasuredStep) {
  EXPECT_NEAR(curve().ratio(4, 16), 0.040 / 0.013, 1e-12);
  EXPECT_DOUBLE_EQ(DecodeCurve{}.ratio(4, 16), 1.0);  // nothing measured: no change
  EXPECT_TRUE(DecodeCurve({64, {{1, 0.01}}}).empty());
}

TEST(DecodeRowSweep, RowCountsArePowersOfTwoThenTheMaximum) {
  EXPECT_EQ(sweep_row_counts(1), (std::vector<int>{1}));
  EXPECT_EQ(sweep_row_counts(8), (std::vector<int>{1, 2, 4, 8}));
  EXPECT_EQ(sweep_row_counts(12), (std::vector<int>{1, 2, 4, 8, 12}));
}

class DecodeRowSweepModel : public ::testing::Test {
 protected:
  void SetUp() override {
    RAPIDE_REQUIRE_SHARED("models/stories260K/stories260K.gguf");
    model_ = std::make_unique<Model>(std::make_shared<const ModelFile>(
        load_model(testing::shared_path("models/stories260K/stories260K.gguf"))));
  }
  std::unique_ptr<Model> model_;
  ThreadPool pool_{1};
};

TEST_F(DecodeRowSweepModel, TimesEveryRowCountAtTheContextAsked) {
  DecodeSweepOptions o;
  o.context = 40;
  o.max_rows = 8;
  o.steps = 2;
  o.repeats = 2;
  const DecodeCurve c = sweep_decode_rows(*model_, pool_, o);
  EXPECT_EQ(c.context, 40);
  ASSERT_EQ(c.points.size(), 4u);
  for (size_t i = 0; i < c.points.size(); ++i) {
    EXPECT_EQ(c.points[i].rows, 1 << i);
    EXPECT_GT(c.points[i].seconds, 0.0);
  }
  // 8 rows do 8 times the matrix work of one (and read 8 rows of KV): the step grows.
  EXPECT_GT(c.points.back().seconds, c.points.front().seconds);
}

TEST_F(DecodeRowSweepModel, FewerRowsThanAskedWhenTheirKvWouldPassTheCap) {
  DecodeSweepOptions o;
  o.context = 200;
  o.max_rows = 32;
  o.steps = 1;
  o.repeats = 1;
  const KvLayout layout = KvLayout::for_model(model_->config(), o.block_size, o.kv_type);
  // Room for 5 sequences of 13 blocks (201 positions in 16-token blocks).
  o.max_kv_bytes = 5 * 13 * layout.block_bytes();
  const DecodeCurve c = sweep_decode_rows(*model_, pool_, o);
  ASSERT_FALSE(c.points.empty());
  EXPECT_EQ(c.points.back().rows, 5);
}

TEST_F(DecodeRowSweepModel, RefusesNonsense) {
  DecodeSweepOptions o;
  o.context = 0;
  EXPECT_THROW(sweep_decode_rows(*model_, pool_, o), Error);
}

}  // namespace
}  // namespace rapide::advise
