// Request parsing: OpenAI defaults, every prompt form, and errors that name the field.
#include <gtest/gtest.h>

#include "api/api_error.h"
#include "api/openai_protocol.h"
#include "base/json_nesting.h"
#include "serve/demo_model.h"

namespace rapide::api {
namespace {

using nlohmann::json;

class ProtocolTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = new ModelFile(serve::make_demo_model());
    tokenizer_ = Tokenizer::create(model_->tokenizer).release();
  }
  static void TearDownTestSuite() {
    delete tokenizer_;
    delete model_;
  }
  // The param an invalid body is refused for (fails the test if it is accepted).
  static std::string refused_param(const json& body, bool chat = false) {
    try {
      if (chat) {
        parse_chat_request(body, *tokenizer_);
      } else {
        parse_completion_request(body, *tokenizer_);
      }
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status(), 400) << e.what();
      return e.param();
    }
    ADD_FAILURE() << "accepted " << body.dump();
    return {};
  }
  static ModelFile* model_;
  static Tokenizer* tokenizer_;
};
ModelFile* ProtocolTest::model_ = nullptr;
Tokenizer* ProtocolTest::tokenizer_ = nullptr;

TEST_F(ProtocolTest, CompletionDefaultsFollowOpenAI) {
  const GenerationSpec s = parse_completion_request({{"prompt", "hello world"}}, *tokenizer_);
  EXPECT_EQ(s.sampling.max_tokens, 16);
  EXPECT_FLOAT_EQ(s.sampling.temperature, 1.0f);
  EXPECT_EQ(s.n, 1);
  EXPECT_FALSE(s.stream);
  EXPECT_FALSE(s.seed_given);
  ASSERT_EQ(s.prompts.size(), 1u);
  EXPECT_EQ(s.prompts[0].front(), tokenizer_->bos_id());
  // Without a seed every request draws its own.
  const GenerationSpec t = parse_completion_request({{"prompt", "hello world"}}, *tokenizer_);
  EXPECT_NE(s.sampling.seed, t.sampling.seed);
}

TEST_F(ProtocolTest, ChatPrefersMaxCompletionTokensAndHasNoDefaultCap) {
  const json messages = json::array({{{"role", "user"}, {"content", "hi"}}});
  GenerationSpec s = parse_chat_request({{"messages", messages}}, *tokenizer_);
  EXPECT_EQ(s.sampling.max_tokens, std::numeric_limits<int32_t>::max());
  s = parse_chat_request({{"messages", messages}, {"max_tokens", 9}, {"max_completion_tokens", 5}},
                         *tokenizer_);
  EXPECT_EQ(s.sampling.max_tokens, 5);
  // Content given as text parts is joined.
  const json parts = json::array({{{"role", "user"},
                                   {"content", json::array({{{"type", "text"}, {"text", "a"}},
                                                            {{"type", "text"}, {"text", "b"}}})}}});
  s = parse_chat_request({{"messages", parts}}, *tokenizer_);
  EXPECT_EQ(s.messages[0]["content"], "ab");
}

TEST_F(ProtocolTest, EveryPromptForm) {
  EXPECT_EQ(parse_completion_request({{"prompt", {"a", "b"}}}, *tokenizer_).prompts.size(), 2u);
  const GenerationSpec ids = parse_completion_request({{"prompt", {5, 6, 7}}}, *tokenizer_);
  EXPECT_EQ(ids.prompts[0], (std::vector<int32_t>{5, 6, 7}));
  const GenerationSpec lists =
      parse_completion_request({{"prompt", {{5, 6}, {7}}}, {"n", 2}}, *tokenizer_);
  EXPECT_EQ(lists.prompts.size(), 2u);
  EXPECT_EQ(lists.n, 2);
}

TEST_F(ProtocolTest, SamplingFieldsArrive) {
  const json body = {{"prompt", "x"},
                     {"temperature", 0.5},
                     {"top_p", 0.9},
                     {"top_k", 40},
                     {"min_p", 0.1},
                     {"presence_penalty", 0.5},
                     {"frequency_penalty", 0.25},
                     {"repetition_penalty", 1.1},
                     {"seed", 42},
                     {"stop", "END"},
                     {"logit_bias", {{"7", -100}, {"8", 5}}},
                     {"logprobs", 3},
                     {"stream", true},
                     {"stream_options", {{"include_usage", true}}}};
  const GenerationSpec s = parse_completion_request(body, *tokenizer_);
  const SamplingParams& p = s.sampling;
  EXPECT_FLOAT_EQ(p.temperature, 0.5f);
  EXPECT_FLOAT_EQ(p.top_p, 0.9f);
  EXPECT_EQ(p.top_k, 40);
  EXPECT_FLOAT_EQ(p.min_p, 0.1f);
  EXPECT_FLOAT_EQ(p.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(p.frequency_penalty, 0.25f);
  EXPECT_FLOAT_EQ(p.repetition_penalty, 1.1f);
  EXPECT_EQ(p.seed, 42u);
  EXPECT_TRUE(s.seed_given);
  EXPECT_EQ(p.stop, std::vector<std::string>{"END"});
  ASSERT_EQ(p.logit_bias.size(), 2u);
  EXPECT_EQ(p.logit_bias[0].token, 7);
  EXPECT_FLOAT_EQ(p.logit_bias[0].bias, -100.0f);
  EXPECT_TRUE(p.logprobs);
  EXPECT_EQ(p.top_logprobs, 3);
  EXPECT_TRUE(s.stream);
  EXPECT_TRUE(s.include_usage);
  const GenerationSpec list =
      parse_completion_request({{"prompt", "x"}, {"stop", {"a", "b"}}}, *tokenizer_);
  EXPECT_EQ(list.sampling.stop.size(), 2u);
}

TEST_F(ProtocolTest, ErrorsNameTheField) {
  EXPECT_EQ(refused_param({{"max_tokens", 3}}), "prompt");
  EXPECT_EQ(refused_param({{"prompt", 5}}), "prompt");
  EXPECT_EQ(refused_param({{"prompt", {1, 100000}}}), "prompt");
  EXPECT_EQ(refused_param({{"prompt", "x"}, {"temperature", "hot"}}), "temperature");
  EXPECT_EQ(refused_param({{"prompt", "x"}, {"top_p", 1.5}}), "top_p");
  EXPECT_EQ(refused_param({{"prompt", "x"}, {"max_tokens", 0}}), "max_tokens");
  EXPECT_EQ(refused_param({{"prompt", "x"}, {"n", 1000}}), "n");
  EXPECT_EQ(refused_param({{"prompt", "x"}, {"stop", 3}}), "stop");
  EXPECT_EQ(refused_param({{"prompt", "x"}, {"logit_bias", {{"abc", 1}}}}), "logit_bias");
  EXPECT_EQ(refused_param({{"prompt", "x"}, {"logit_bias", {{"5", 500}}}}), "logit_bias");
  EXPECT_EQ(refused_param({{"prompt", "x"}, {"logprobs", 50}}), "logprobs");
  EXPECT_EQ(refused_param({{"prompt", "x"}, {"echo", true}}), "echo");
  EXPECT_EQ(refused_param({{"prompt", "x"}, {"best_of", 3}}), "best_of");
  EXPECT_EQ(refused_param({{"messages", json::array()}}, true), "messages");
  EXPECT_EQ(refused_param({{"messages", {{{"content", "no role"}}}}}, true), "messages[0]");
  const json m = json::array({{{"role", "user"}, {"content", "hi"}}});
  EXPECT_EQ(refused_param({{"messages", m}, {"top_logprobs", 2}}, true), "top_logprobs");
}

// Issue 51: OpenAI refuses these; rapide accepted temperature 5 and a role "wizard". The
// limits are OpenAI's documented ones, and the error names the field as OpenAI does.
TEST_F(ProtocolTest, OpenAILimitsAreOpenAIs) {
  const json m = json::array({{{"role", "user"}, {"content", "hi"}}});
  for (const auto& [key, value] :
       std::vector<std::pair<std::string, json>>{{"temperature", 5},
                                                 {"temperature", 2.01},
                                                 {"temperature", -0.1},
                                                 {"top_p", 1.01},
                                                 {"top_p", -0.5},
                                                 {"presence_penalty", 2.5},
                                                 {"frequency_penalty", -3},
                                                 {"n", 0},
                                                 {"top_logprobs", 21}}) {
    json body = {{"messages", m}, {"logprobs", true}};
    body[key] = value;
    try {
      parse_chat_request(body, *tokenizer_);
      ADD_FAILURE() << "accepted " << key << " " << value.dump();
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status(), 400) << e.what();
      EXPECT_EQ(e.param(), key) << e.what();
      EXPECT_EQ(e.code(), "invalid_value") << key << ": " << e.what();
      EXPECT_STREQ(e.type(), "invalid_request_error");
    }
  }
  // The edges are allowed.
  json edges = {{"messages", m},          {"temperature", 2},       {"top_p", 1},
                {"presence_penalty", -2}, {"frequency_penalty", 2}, {"logprobs", true},
                {"top_logprobs", 20}};
  EXPECT_FLOAT_EQ(parse_chat_request(edges, *tokenizer_).sampling.temperature, 2.0f);
  edges["temperature"] = 0;
  EXPECT_FLOAT_EQ(parse_chat_request(edges, *tokenizer_).sampling.temperature, 0.0f);
  EXPECT_EQ(refused_param({{"prompt", "x"}, {"temperature", 3}}), "temperature");

  for (const char* role : {"system", "developer", "user", "assistant", "tool", "function"}) {
    const json ok = json::array({{{"role", role}, {"content", "x"}}});
    EXPECT_NO_THROW(parse_chat_request({{"messages", ok}}, *tokenizer_)) << role;
  }
  // "developer" is OpenAI's newer name for "system": the chat template sees "system".
  const json developer = json::array(
      {{{"role", "developer"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "x"}}});
  EXPECT_EQ(parse_chat_request({{"messages", developer}}, *tokenizer_).messages[0]["role"],
            "system");
  // top_p 0 is OpenAI's edge too (the most likely token alone).
  edges["top_p"] = 0;
  EXPECT_FLOAT_EQ(parse_chat_request(edges, *tokenizer_).sampling.top_p, 0.0f);
  const json wizard =
      json::array({{{"role", "user"}, {"content", "hi"}}, {{"role", "wizard"}, {"content", "hi"}}});
  try {
    parse_chat_request({{"messages", wizard}}, *tokenizer_);
    ADD_FAILURE() << "accepted the role wizard";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_EQ(e.param(), "messages[1].role");
    EXPECT_NE(std::string(e.what()).find("'wizard'"), std::string::npos) << e.what();
    const json shape = json::parse(e.to_json());
    EXPECT_EQ(shape["error"]["type"], "invalid_request_error");
    EXPECT_EQ(shape["error"]["param"], "messages[1].role");
    EXPECT_EQ(shape["error"]["code"], "invalid_value");
  }
}

// llama-server's n_predict is max_tokens (-1: no limit but the context), on both routes.
TEST_F(ProtocolTest, NPredictIsMaxTokens) {
  const json m = json::array({{{"role", "user"}, {"content", "hi"}}});
  EXPECT_EQ(parse_completion_request({{"prompt", "x"}, {"n_predict", 3}}, *tokenizer_)
                .sampling.max_tokens,
            3);
  EXPECT_EQ(
      parse_chat_request({{"messages", m}, {"n_predict", 7}}, *tokenizer_).sampling.max_tokens, 7);
  EXPECT_EQ(parse_completion_request({{"prompt", "x"}, {"n_predict", -1}}, *tokenizer_)
                .sampling.max_tokens,
            std::numeric_limits<int32_t>::max());
  // Both, agreeing, are fine; disagreeing, a 400 naming n_predict.
  EXPECT_EQ(
      parse_completion_request({{"prompt", "x"}, {"n_predict", 4}, {"max_tokens", 4}}, *tokenizer_)
          .sampling.max_tokens,
      4);
  EXPECT_EQ(refused_param({{"prompt", "x"}, {"n_predict", 4}, {"max_tokens", 5}}), "n_predict");
  EXPECT_EQ(refused_param({{"messages", m}, {"n_predict", 4}, {"max_completion_tokens", 5}}, true),
            "n_predict");
  EXPECT_EQ(refused_param({{"prompt", "x"}, {"n_predict", 0}}), "n_predict");
  EXPECT_EQ(refused_param({{"prompt", "x"}, {"n_predict", -2}}), "n_predict");
  EXPECT_EQ(refused_param({{"prompt", "x"}, {"n_predict", "3"}}), "n_predict");
}

// The "speculative" extension: its shape is parsed on both routes (what the server can
// honour is the engine's check, tests/unit/engine/speculative_test.cpp).
TEST_F(ProtocolTest, SpeculativeExtension) {
  const GenerationSpec none = parse_completion_request({{"prompt", "x"}}, *tokenizer_);
  EXPECT_FALSE(none.speculative.mode.has_value());
  EXPECT_FALSE(none.speculative.tokens.has_value());
  const GenerationSpec off =
      parse_completion_request({{"prompt", "x"}, {"speculative", {{"mode", "off"}}}}, *tokenizer_);
  EXPECT_EQ(off.speculative.mode, SpecMode::kOff);
  EXPECT_FALSE(off.speculative.tokens.has_value());
  const GenerationSpec ngram = parse_completion_request(
      {{"prompt", "x"}, {"speculative", {{"mode", "ngram"}, {"tokens", 3}}}}, *tokenizer_);
  EXPECT_EQ(ngram.speculative.mode, SpecMode::kNgram);
  EXPECT_EQ(ngram.speculative.tokens, 3);
  const json m = json::array({{{"role", "user"}, {"content", "hi"}}});
  const GenerationSpec chat = parse_chat_request(
      {{"messages", m}, {"speculative", {{"mode", "draft"}, {"tokens", "auto"}}}}, *tokenizer_);
  EXPECT_EQ(chat.speculative.mode, SpecMode::kDraft);
  EXPECT_EQ(chat.speculative.tokens, -1);

  for (const json& bad :
       {json("ngram"), json{{"mode", "medusa"}}, json{{"mode", 1}}, json{{"tokens", -1}},
        json{{"tokens", 65}}, json{{"tokens", "many"}}, json{{"tokens", 2.5}}}) {
    EXPECT_EQ(refused_param({{"prompt", "x"}, {"speculative", bad}}), "speculative") << bad;
    EXPECT_EQ(refused_param({{"messages", m}, {"speculative", bad}}, true), "speculative") << bad;
  }
}

TEST_F(ProtocolTest, MalformedJsonSaysWhere) {
  try {
    parse_json_body("{\"prompt\": ");
    FAIL();
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_NE(std::string(e.what()).find("not valid JSON"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_json_body(""), ApiError);
}

// Deep nesting overflowed the stack in recursive walks after parsing (issue 18): refused up
// front at kMaxJsonDepth, brackets inside strings not counted; and a number beyond double's
// range is invalid JSON (a 400), not an escaping out_of_range (a 500).
TEST_F(ProtocolTest, DeepNestingAndHugeNumbersAreInvalidJson) {
  const auto nested = [](size_t depth) {
    return "{\"x\": " + std::string(depth - 1, '[') + std::string(depth - 1, ']') + "}";
  };
  EXPECT_NO_THROW(parse_json_body(nested(kMaxJsonDepth)));
  const std::string brackets_in_string = "{\"x\": \"" + std::string(1000, '[') + "\\\"\"}";
  EXPECT_NO_THROW(parse_json_body(brackets_in_string));
  for (const std::string& body :
       {nested(kMaxJsonDepth + 1), nested(60000), std::string("{\"temperature\": 1e400}")}) {
    try {
      parse_json_body(body);
      ADD_FAILURE() << body.substr(0, 40);
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status(), 400);
      EXPECT_EQ(e.code(), "invalid_json");
    }
  }
}

}  // namespace
}  // namespace rapide::api

namespace rapide::api {
namespace {

// Structured output and tool fields: what they turn into, and 400s naming the field.
TEST_F(ProtocolTest, StructuredOutputFieldsBecomeOneConstraint) {
  const json messages = json::array({{{"role", "user"}, {"content", "hi"}}});
  const json schema_format = json::parse(R"({"type": "json_schema", "json_schema": {"name": "x",
      "strict": true, "schema": {"type": "object", "properties": {"a": {"type": "integer"}}}}})");
  const GenerationSpec chat =
      parse_chat_request({{"messages", messages}, {"response_format", schema_format}}, *tokenizer_);
  ASSERT_TRUE(chat.sampling.constraint);
  // The same schema again shares the compiled grammar (and its mask cache).
  const GenerationSpec again =
      parse_completion_request({{"prompt", "x"}, {"response_format", schema_format}}, *tokenizer_);
  EXPECT_EQ(again.sampling.constraint, chat.sampling.constraint);
  EXPECT_FALSE(parse_completion_request({{"prompt", "x"}, {"response_format", {{"type", "text"}}}},
                                        *tokenizer_)
                   .sampling.constraint);
  for (const json& extra : {json{{"grammar", "root ::= \"a\""}}, json{{"guided_regex", "a+"}},
                            json{{"guided_choice", {"a", "b"}}},
                            json{{"response_format", {{"type", "json_object"}}}}}) {
    json body = extra;
    body["prompt"] = "x";
    const GenerationSpec parsed = parse_completion_request(body, *tokenizer_);
    EXPECT_TRUE(parsed.sampling.constraint) << extra.dump();
    // The engine's errors about the constraint name this field.
    EXPECT_EQ(parsed.constraint_param, extra.begin().key()) << extra.dump();
  }
  EXPECT_EQ(refused_param({{"prompt", "x"}, {"grammar", "root ::= undefined"}}), "grammar");
  // A code point beyond U+10FFFF has no UTF-8 encoding (red-team N6).
  EXPECT_EQ(refused_param({{"prompt", "x"}, {"grammar", R"(root ::= "\U7FFFFFFF")"}}), "grammar");
  EXPECT_EQ(refused_param({{"prompt", "x"}, {"guided_regex", "(?=a)"}}), "guided_regex");
  EXPECT_EQ(refused_param({{"prompt", "x"}, {"guided_choice", "a"}}), "guided_choice");
  EXPECT_EQ(refused_param({{"prompt", "x"}, {"grammar", "root ::= \"a\""}, {"guided_regex", "a"}}),
            "guided_regex");
  EXPECT_EQ(
      refused_param({{"prompt", "x"}, {"response_format", json::parse(R"({"type": "json_schema",
                               "json_schema": {"name": "x", "schema": {"minProperties": 1}}})")}}),
      "response_format");
}

TEST_F(ProtocolTest, ToolChoiceIsCheckedAgainstTools) {
  const json messages = json::array({{{"role", "user"}, {"content", "hi"}}});
  const json tools = json::parse(
      R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}])");
  const GenerationSpec s =
      parse_chat_request({{"messages", messages}, {"tools", tools}}, *tokenizer_);
  EXPECT_TRUE(s.parse_tool_calls);  // auto by default when tools are given
  EXPECT_FALSE(s.tool_call_required);
  const GenerationSpec named =
      parse_chat_request({{"messages", messages},
                          {"tools", tools},
                          {"tool_choice", {{"type", "function"}, {"function", {{"name", "f"}}}}}},
                         *tokenizer_);
  EXPECT_TRUE(named.tool_call_required);
  EXPECT_EQ(named.tool_choice_name, "f");
  EXPECT_FALSE(parse_chat_request(
                   {{"messages", messages}, {"tools", tools}, {"tool_choice", "none"}}, *tokenizer_)
                   .parse_tool_calls);
  EXPECT_EQ(
      refused_param({{"messages", messages}, {"tools", tools}, {"tool_choice", "always"}}, true),
      "tool_choice");
  EXPECT_EQ(refused_param({{"messages", messages}, {"tool_choice", "required"}}, true),
            "tool_choice");
  EXPECT_EQ(
      refused_param({{"messages", messages}, {"tools", json::array({{{"type", "x"}}})}}, true),
      "tools[0]");
  EXPECT_EQ(refused_param({{"messages", messages},
                           {"tools", tools},
                           {"tool_choice", "required"},
                           {"guided_regex", "a"}},
                          true),
            "tool_choice");
}

// A "type" that is not a string is a 400 naming the field, not a JSON type error escaping the
// parser (found by fuzzing: {"tools": [{"type": {"name": "w"}}]} ended the process).
TEST_F(ProtocolTest, NonStringTypesAreRefusedByField) {
  const json messages = json::array({{{"role", "user"}, {"content", "hi"}}});
  const json object_type = {{"name", "w"}};
  EXPECT_EQ(refused_param(
                {{"messages", messages},
                 {"tools", json::array({{{"type", object_type}, {"function", {{"name", "f"}}}}})}},
                true),
            "tools[0]");
  const json tools = json::parse(R"([{"type": "function", "function": {"name": "f"}}])");
  EXPECT_EQ(refused_param({{"messages", messages},
                           {"tools", tools},
                           {"tool_choice", {{"type", 7}, {"function", {{"name", "f"}}}}}},
                          true),
            "tool_choice");
  const json parts = json::array({{{"type", json::array({"text"})}, {"text", "a"}}});
  EXPECT_EQ(
      refused_param({{"messages", json::array({{{"role", "user"}, {"content", parts}}})}}, true),
      "messages[0]");
}

}  // namespace
}  // namespace rapide::api
