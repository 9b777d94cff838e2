// API keys and the mapping of rapide errors to OpenAI-style HTTP errors.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "serve/api_error.h"
#include "serve/auth.h"

namespace rapide::serve {
namespace {

TEST(ApiKeys, BearerOnlyWithAKnownKey) {
  const ApiKeys none;
  EXPECT_FALSE(none.enabled());
  const ApiKeys keys({"sk-one", " sk-two "}, "");
  EXPECT_TRUE(keys.enabled());
  EXPECT_TRUE(keys.accepts("Bearer sk-one"));
  EXPECT_TRUE(keys.accepts("Bearer sk-two"));
  EXPECT_FALSE(keys.accepts("Bearer sk-on"));
  EXPECT_FALSE(keys.accepts("Bearer sk-one1"));
  EXPECT_FALSE(keys.accepts("sk-one"));
  EXPECT_FALSE(keys.accepts("Basic sk-one"));
  EXPECT_FALSE(keys.accepts(""));
}

TEST(ApiKeys, KeyFileSkipsCommentsAndBlankLines) {
  const std::string path = ::testing::TempDir() + "/rapide_keys.txt";
  {
    std::ofstream out(path);
    out << "# keys\n\nsk-file\n";
  }
  const ApiKeys keys({}, path);
  EXPECT_TRUE(keys.accepts("Bearer sk-file"));
  EXPECT_FALSE(keys.accepts("Bearer # keys"));
  {
    std::ofstream out(path);
    out << "# nothing\n";
  }
  EXPECT_THROW(ApiKeys({}, path), Error);
  EXPECT_THROW(ApiKeys({}, path + ".missing"), Error);
  std::remove(path.c_str());
}

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
}

}  // namespace
}  // namespace rapide::serve
