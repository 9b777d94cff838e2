// The mapping of rapide errors to OpenAI-style HTTP errors.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "api/api_error.h"

namespace rapide::api {
namespace {

TEST(ApiError, CodesMapToStatuses) {
  EXPECT_EQ(api_error_from(Error(ErrorCode::kInvalidArgument, "x")).status(), 400);
  EXPECT_EQ(api_error_from(Error(ErrorCode::kOutOfRange, "x")).status(), 400);
  EXPECT_EQ(api_error_from(Error(ErrorCode::kNotFound, "x")).status(), 404);
  const ApiError full = api_error_from(Error(ErrorCode::kResourceExhausted, "queue"));
  EXPECT_EQ(full.status(), 429);
  EXPECT_TRUE(full.retry_after().has_value());
  const ApiError draining = api_error_from(Error(ErrorCode::kUnavailable, "draining"));
  EXPECT_EQ(draining.status(), 503);
  EXPECT_TRUE(draining.retry_after().has_value());
  EXPECT_EQ(api_error_from(Error(ErrorCode::kInternal, "bug")).status(), 500);
}

TEST(ApiError, OpenAIShapeWithParamFromTheMessage) {
  const ApiError e = api_error_from(Error(ErrorCode::kInvalidArgument, "top_p must be in (0, 1]"));
  const nlohmann::json j = nlohmann::json::parse(e.to_json());
  EXPECT_EQ(j["error"]["message"], "top_p must be in (0, 1]");
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_EQ(j["error"]["param"], "top_p");
  EXPECT_TRUE(j["error"].contains("code"));
  // An engine message starting with an ordinary word takes the param given.
  const ApiError p =
      api_error_from(Error(ErrorCode::kOutOfRange, "the prompt has 600 tokens"), "prompt");
  EXPECT_EQ(p.param(), "prompt");
  EXPECT_EQ(nlohmann::json::parse(ApiError(404, "no").to_json())["error"]["param"], nullptr);
  // An element of a list names the list (e2e_adversarial: a 1025-byte stop string's 400 had
  // no param, while 65 stop strings named 'stop').
  EXPECT_EQ(api_error_from(Error(ErrorCode::kInvalidArgument, "stop[0] must be at most 1024 bytes"))
                .param(),
            "stop");
  EXPECT_EQ(api_error_from(Error(ErrorCode::kInvalidArgument, "stop[] is odd"), "x").param(), "x");
  EXPECT_EQ(api_error_from(Error(ErrorCode::kInvalidArgument, "stop[1]x"), "x").param(), "x");
}

// Issue 51: a grammar the model's vocabulary cannot continue failed the request with 500
// server_error; it is the request's problem, so 400, like the rest of the grammar errors.
TEST(ApiError, AGrammarTheVocabularyCannotSpellIsA400) {
  const ApiError dead_end =
      generation_failed("grammar: no token of the model's vocabulary can continue the output",
                        ErrorCode::kUnsupported);
  EXPECT_EQ(dead_end.status(), 400);
  EXPECT_STREQ(dead_end.type(), "invalid_request_error");
  EXPECT_EQ(dead_end.code(), "unsupported");
  EXPECT_EQ(generation_failed("bug").status(), 500);
  // Refused at admission: the error names the constraint's field.
  const ApiError start = api_error_from(
      Error(ErrorCode::kUnsupported, "grammar: no token of the model's vocabulary can start it"),
      "response_format");
  EXPECT_EQ(start.status(), 400);
  EXPECT_EQ(start.param(), "response_format");
}

}  // namespace
}  // namespace rapide::api
