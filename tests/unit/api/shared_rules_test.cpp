// The rules serve and batch share through src/api, pinned to the exact messages, codes and
// seeds both front ends produced before they were shared.
#include <gtest/gtest.h>

#include <vector>

#include "api/choice_outcome.h"
#include "api/engine_requests.h"
#include "api/front_end.h"
#include "api/openai_protocol.h"

namespace rapide::api {
namespace {

TEST(SharedRules, ChoiceZeroKeepsTheSeedOthersStepByTheGoldenRatio) {
  EXPECT_EQ(choice_seed(42, 0), 42u);
  EXPECT_EQ(choice_seed(42, 1), 42u + 0x9E3779B97F4A7C15ull);
  EXPECT_EQ(choice_seed(~0ull, 2), ~0ull + 2 * 0x9E3779B97F4A7C15ull);  // wraps, as before
}

TEST(SharedRules, RefusalsNameThePromptField) {
  EXPECT_STREQ(prompt_param(Endpoint::kChat), "messages");
  EXPECT_STREQ(prompt_param(Endpoint::kCompletions), "prompt");
  EXPECT_EQ(endpoint_for_path("/v1/chat/completions"), Endpoint::kChat);
  EXPECT_EQ(endpoint_for_path("/v1/completions"), Endpoint::kCompletions);
  EXPECT_FALSE(endpoint_for_path("/v1/completions/").has_value());
  EXPECT_STREQ(endpoint_name(Endpoint::kChat), "chat.completions");
}

TEST(SharedRules, FrontEndsRefuseOtherModelsAndBatchRefusesStreams) {
  GenerationSpec spec;
  spec.model = "other";
  for (const FrontEnd front_end : {FrontEnd::kServer, FrontEnd::kBatch}) {
    try {
      check_front_end(spec, "mine", front_end);
      ADD_FAILURE() << "accepted another model";
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status(), 404);
      EXPECT_EQ(e.param(), "model");
      EXPECT_EQ(e.code(), "model_not_found");
      EXPECT_STREQ(e.what(), front_end == FrontEnd::kServer
                                 ? "the model 'other' does not exist; this server serves 'mine'"
                                 : "the model 'other' does not exist; this batch runs 'mine'");
    }
  }
  EXPECT_STREQ(model_not_found("x").what(), "the model 'x' does not exist");
  spec.model.clear();
  spec.stream = true;
  EXPECT_NO_THROW(check_front_end(spec, "mine", FrontEnd::kServer));
  try {
    check_front_end(spec, "mine", FrontEnd::kBatch);
    ADD_FAILURE() << "a batch accepted a stream";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_EQ(e.param(), "stream");
    EXPECT_EQ(e.code(), "unsupported");
  }
}

TEST(SharedRules, UsageCountsEachPromptOnceAndFailuresAreFound) {
  std::vector<ChoiceOutcome> choices(4);  // 2 prompts x n = 2
  for (size_t i = 0; i < choices.size(); ++i) {
    choices[i].prompt_tokens = i < 2 ? 10 : 20;
    choices[i].cached_prompt_tokens = i < 2 ? 4 : 0;
    choices[i].completion_tokens = static_cast<int32_t>(i + 1);
  }
  const Usage u = usage_of(choices, 2);
  EXPECT_EQ(u.prompt_tokens, 30);
  EXPECT_EQ(u.cached_tokens, 4);
  EXPECT_EQ(u.completion_tokens, 10);
  EXPECT_EQ(first_failure(choices), nullptr);
  choices[3].reason = FinishReason::kError;
  choices[3].error = "boom";
  ASSERT_EQ(first_failure(choices), &choices[3]);
  const ApiError e = generation_failed(choices[3].error);
  EXPECT_EQ(e.status(), 500);
  EXPECT_EQ(e.code(), "engine_error");
  EXPECT_STREQ(e.what(), "generation failed: boom");
  // Past a limit (a grammar over its per-token work): the request's fault, a 400 that a
  // retry would not fix, on the server and in a batch's line alike.
  const ApiError limit =
      generation_failed("grammar: ... (the per-token limit)", ErrorCode::kExceedsCapacity);
  EXPECT_EQ(limit.status(), 400);
  EXPECT_EQ(limit.code(), "exceeds_limit");
}

TEST(SharedRules, ASilentStopTokenHasNoLogprobEntry) {
  ChoiceOutcome c;
  TokenEvent token;
  token.token = 5;
  token.text = "hi";
  token.logprob = -0.5f;
  c.add(std::move(token), true);
  TokenEvent stop;
  stop.token = 2;
  stop.finished = true;
  stop.finish_reason = FinishReason::kStop;
  stop.completion_tokens = 2;
  c.add(std::move(stop), true);
  EXPECT_TRUE(c.done);
  EXPECT_EQ(c.text, "hi");
  ASSERT_EQ(c.logprobs.size(), 1u);
  EXPECT_EQ(c.logprobs[0].token, 5);
  EXPECT_EQ(c.tokens_seen, 2);
  EXPECT_EQ(c.completion_tokens, 2);
}

}  // namespace
}  // namespace rapide::api
