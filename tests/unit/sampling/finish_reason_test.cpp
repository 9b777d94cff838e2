// Token-level finish rules: end-of-generation, stop_token_ids, max_tokens, min_tokens.
#include <gtest/gtest.h>

#include <string>

#include "sampling/finish_reason.h"

namespace rapide {
namespace {

TEST(FinishReasonTest, NamesMatchOpenAi) {
  EXPECT_EQ(std::string(finish_reason_name(FinishReason::kLength)), "length");
  EXPECT_EQ(std::string(finish_reason_name(FinishReason::kStop)), "stop");
  EXPECT_EQ(std::string(finish_reason_name(FinishReason::kAbort)), "abort");
  EXPECT_EQ(std::string(finish_reason_name(FinishReason::kError)), "error");
}

TEST(FinishReasonTest, EndOfGenerationStopsUnlessIgnored) {
  SamplingParams params;
  EXPECT_EQ(finish_after_token(params, 2, true, 1), FinishReason::kStop);
  EXPECT_EQ(finish_after_token(params, 5, false, 1), std::nullopt);
  params.ignore_eos = true;
  EXPECT_EQ(finish_after_token(params, 2, true, 1), std::nullopt);
}

TEST(FinishReasonTest, StopTokenIdsStop) {
  SamplingParams params;
  params.stop_token_ids = {7, 9};
  EXPECT_EQ(finish_after_token(params, 9, false, 3), FinishReason::kStop);
  EXPECT_EQ(finish_after_token(params, 8, false, 3), std::nullopt);
}

TEST(FinishReasonTest, LengthAtMaxTokensButStopWins) {
  SamplingParams params;
  params.max_tokens = 4;
  EXPECT_EQ(finish_after_token(params, 5, false, 3), std::nullopt);
  EXPECT_EQ(finish_after_token(params, 5, false, 4), FinishReason::kLength);
  EXPECT_EQ(finish_after_token(params, 5, true, 4), FinishReason::kStop);
}

TEST(FinishReasonTest, MinTokensDefersStops) {
  SamplingParams params;
  params.min_tokens = 2;
  params.stop_token_ids = {7};
  EXPECT_EQ(finish_after_token(params, 1, true, 1), std::nullopt);
  EXPECT_EQ(finish_after_token(params, 7, false, 2), std::nullopt);
  EXPECT_EQ(finish_after_token(params, 1, true, 3), FinishReason::kStop);
  EXPECT_EQ(finish_after_token(params, 7, false, 3), FinishReason::kStop);
}

}  // namespace
}  // namespace rapide
