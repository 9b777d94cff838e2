// SamplingParams::validate: every out-of-range value is rejected with the name of the
// request parameter, and in-range edge values are accepted.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "base/error.h"
#include "sampling/sampling_params.h"

namespace rapide {
namespace {

constexpr int kVocab = 100;
constexpr float kInf = std::numeric_limits<float>::infinity();

// Runs validate and returns the message of the kInvalidArgument it throws ("" if none).
std::string validation_error(const std::function<void(SamplingParams&)>& change) {
  SamplingParams params;
  change(params);
  try {
    params.validate(kVocab);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    return e.what();
  }
  return "";
}

TEST(SamplingParamsTest, DefaultsAreValidAndOff) {
  SamplingParams params;
  EXPECT_NO_THROW(params.validate(kVocab));
  EXPECT_FALSE(params.is_greedy());
  EXPECT_FALSE(params.wants_logprobs());
  EXPECT_EQ(params.num_alternatives(), 0);
}

TEST(SamplingParamsTest, RejectsOutOfRangeValuesNamingTheParameter) {
  struct Case {
    std::function<void(SamplingParams&)> change;
    std::string expected;
  };
  const Case cases[] = {
      {[](SamplingParams& p) { p.temperature = -0.1f; }, "temperature must be in [0, 100]"},
      {[](SamplingParams& p) { p.temperature = 100.5f; }, "temperature"},
      {[](SamplingParams& p) { p.temperature = std::nanf(""); }, "temperature"},
      {[](SamplingParams& p) { p.top_k = -1; }, "top_k must be >= 0, got -1"},
      {[](SamplingParams& p) { p.top_p = -0.1f; }, "top_p must be in [0, 1], got -0.1"},
      {[](SamplingParams& p) { p.top_p = 1.5f; }, "top_p must be in [0, 1], got 1.5"},
      {[](SamplingParams& p) { p.min_p = -0.1f; }, "min_p must be in [0, 1]"},
      {[](SamplingParams& p) { p.min_p = 1.1f; }, "min_p"},
      {[](SamplingParams& p) { p.repetition_penalty = 0.0f; }, "repetition_penalty"},
      {[](SamplingParams& p) { p.repetition_penalty = kInf; }, "repetition_penalty"},
      // Dividing logits by 1e-45 makes them inf: a sampler failure (500) instead of a 400.
      {[](SamplingParams& p) { p.repetition_penalty = 1e-45f; }, "repetition_penalty"},
      {[](SamplingParams& p) { p.repetition_penalty = 1e30f; }, "repetition_penalty"},
      // min_tokens bans every stop token id: with all of them stops nothing is left to sample.
      {[](SamplingParams& p) {
         p.min_tokens = 1;
         for (int32_t t = 0; t < kVocab; ++t) p.stop_token_ids.push_back(t);
       },
       "min_tokens"},
      {[](SamplingParams& p) { p.presence_penalty = 2.5f; }, "presence_penalty must be in [-2, 2]"},
      {[](SamplingParams& p) { p.frequency_penalty = -2.1f; }, "frequency_penalty"},
      {[](SamplingParams& p) { p.penalty_last_n = -2; }, "penalty_last_n must be >= -1"},
      {[](SamplingParams& p) {
         p.logit_bias = {{kVocab, 1.0f}};
       },
       "logit_bias: token id 100 is outside the vocabulary [0, 100)"},
      {[](SamplingParams& p) {
         p.logit_bias = {{-1, 1.0f}};
       },
       "logit_bias: token id -1"},
      {[](SamplingParams& p) {
         p.logit_bias = {{3, std::nanf("")}};
       },
       "logit_bias: bias for token 3"},
      {[](SamplingParams& p) {
         p.logit_bias = {{3, kInf}};
       },
       "logit_bias: bias for token 3"},
      {[](SamplingParams& p) { p.max_tokens = 0; }, "max_tokens must be >= 1, got 0"},
      {[](SamplingParams& p) { p.min_tokens = -1; }, "min_tokens"},
      {[](SamplingParams& p) {
         p.max_tokens = 5;
         p.min_tokens = 6;
       },
       "min_tokens must be in [0, max_tokens=5], got 6"},
      {[](SamplingParams& p) {
         p.stop_token_ids = {1, kVocab + 5};
       },
       "stop_token_ids: token id 105"},
      {[](SamplingParams& p) {
         p.stop = {"ok", ""};
       },
       "stop[1] must not be empty"},
      {[](SamplingParams& p) { p.top_logprobs = 21; }, "top_logprobs must be in [0, 20], got 21"},
      {[](SamplingParams& p) { p.top_logprobs = -1; }, "top_logprobs"},
      // Issue 18 item 9: every token is checked against every stop, so they are bounded.
      {[](SamplingParams& p) { p.stop.assign(SamplingParams::kMaxStopStrings + 1, "x"); },
       "stop must hold at most 64 strings, got 65"},
      {[](SamplingParams& p) {
         p.stop = {"x", std::string(SamplingParams::kMaxStopBytes + 1, 'y')};
       },
       "stop[1] must be at most 1024 bytes"},
      {[](SamplingParams& p) { p.stop_token_ids.assign(SamplingParams::kMaxStopTokenIds + 1, 1); },
       "stop_token_ids must hold at most 1024 token ids"},
      {[](SamplingParams& p) { p.n_probs = kVocab + 1; }, "n_probs"},
  };
  for (const Case& c : cases) {
    const std::string message = validation_error(c.change);
    EXPECT_NE(message.find(c.expected), std::string::npos)
        << "expected '" << c.expected << "' in '" << message << "'";
  }
}

TEST(SamplingParamsTest, AcceptsEdgeValues) {
  const std::function<void(SamplingParams&)> changes[] = {
      [](SamplingParams& p) { p.temperature = 0.0f; },
      [](SamplingParams& p) { p.temperature = 100.0f; },
      [](SamplingParams& p) { p.top_p = 1e-6f; },
      [](SamplingParams& p) { p.min_p = 1.0f; },
      [](SamplingParams& p) { p.top_k = kVocab * 10; },  // larger than the vocabulary: off
      [](SamplingParams& p) { p.presence_penalty = -2.0f; },
      [](SamplingParams& p) { p.frequency_penalty = 2.0f; },
      [](SamplingParams& p) { p.penalty_last_n = -1; },
      [](SamplingParams& p) {
        p.logit_bias = {{0, -kInf}, {kVocab - 1, 100.0f}};
      },
      [](SamplingParams& p) { p.top_logprobs = 20; },
      [](SamplingParams& p) { p.n_probs = kVocab; },
      [](SamplingParams& p) { p.stop.assign(SamplingParams::kMaxStopStrings, "x"); },
      [](SamplingParams& p) { p.stop_token_ids.assign(SamplingParams::kMaxStopTokenIds, 1); },
      [](SamplingParams& p) {
        p.max_tokens = 1;
        p.min_tokens = 1;
      },
  };
  for (const auto& change : changes) EXPECT_EQ(validation_error(change), "");
}

TEST(SamplingParamsTest, RejectsEmptyVocabulary) {
  SamplingParams params;
  EXPECT_THROW(params.validate(0), Error);
}

TEST(SamplingParamsTest, AlternativesAreTheLargerRequest) {
  SamplingParams params;
  params.top_logprobs = 5;
  params.n_probs = 3;
  EXPECT_EQ(params.num_alternatives(), 5);
  params.n_probs = 40;
  EXPECT_EQ(params.num_alternatives(), 40);
  EXPECT_TRUE(params.wants_logprobs());
}

}  // namespace
}  // namespace rapide
