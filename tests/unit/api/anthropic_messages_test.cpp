// The Anthropic Messages API dialect (issue 51): requests into chat bodies, chat answers and
// stream chunks into Anthropic's message object and events. The expected shapes are
// Anthropic's documented ones (docs.anthropic.com: Messages, Streaming Messages, Errors).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "api/anthropic_messages.h"
#include "api/api_error.h"

namespace rapide::api {
namespace {

using nlohmann::json;

// The param of the 400 a request is refused with ("accepted" when it is not).
std::string refused(const json& body) {
  try {
    chat_body_from_anthropic(body);
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400) << e.what();
    return e.param();
  }
  return "accepted";
}

json user(const char* text) {
  return json::array({{{"role", "user"}, {"content", text}}});
}

TEST(AnthropicRequestTest, SystemMessagesAndSamplingBecomeAChatBody) {
  const json chat = chat_body_from_anthropic({{"model", "m"},
                                              {"max_tokens", 7},
                                              {"system", "Be brief."},
                                              {"messages", user("Hi")},
                                              {"temperature", 0.5},
                                              {"top_p", 0.9},
                                              {"top_k", 40},
                                              {"stop_sequences", {"\n\n", "END"}},
                                              {"stream", true},
                                              {"metadata", {{"user_id", "u"}}}});
  EXPECT_EQ(chat["model"], "m");
  EXPECT_EQ(chat["max_tokens"], 7);
  EXPECT_EQ(chat["temperature"], 0.5);
  EXPECT_EQ(chat["top_p"], 0.9);
  EXPECT_EQ(chat["top_k"], 40);
  EXPECT_EQ(chat["stop"], json({"\n\n", "END"}));
  EXPECT_EQ(chat["stream"], true);
  EXPECT_EQ(chat["stream_options"]["include_usage"], true);  // message_delta's output_tokens
  EXPECT_EQ(chat["messages"], json::parse(R"([{"role": "system", "content": "Be brief."},
                                              {"role": "user", "content": "Hi"}])"));
  // System as text blocks, content as text blocks.
  const json blocks = chat_body_from_anthropic(json::parse(R"({"max_tokens": 1,
      "system": [{"type": "text", "text": "Be brief."}],
      "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}]})"));
  EXPECT_EQ(blocks["messages"], chat["messages"]);
}

TEST(AnthropicRequestTest, ToolUseAndToolResultBecomeToolCallsAndToolMessages) {
  const json chat = chat_body_from_anthropic(json::parse(R"({
    "max_tokens": 50,
    "tools": [{"name": "get_weather", "description": "Weather of a city",
               "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}],
    "tool_choice": {"type": "any", "disable_parallel_tool_use": true},
    "messages": [
      {"role": "user", "content": "Weather in Paris?"},
      {"role": "assistant", "content": [
        {"type": "text", "text": "Let me look."},
        {"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": {"city": "Paris"}}]},
      {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_01", "content": "15 C"},
        {"type": "text", "text": "Thanks"}]}]})"));
  EXPECT_EQ(chat["tools"], json::parse(R"([{"type": "function", "function": {
      "name": "get_weather", "description": "Weather of a city",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}])"));
  EXPECT_EQ(chat["tool_choice"], "required");
  EXPECT_EQ(chat["parallel_tool_calls"], false);
  EXPECT_EQ(chat["messages"], json::parse(R"([
      {"role": "user", "content": "Weather in Paris?"},
      {"role": "assistant", "content": "Let me look.", "tool_calls": [{"id": "toolu_01",
       "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]},
      {"role": "tool", "tool_call_id": "toolu_01", "content": "15 C"},
      {"role": "user", "content": "Thanks"}])"));
  auto choice = [](const char* text) {
    return chat_body_from_anthropic({{"max_tokens", 1},
                                     {"messages", user("x")},
                                     {"tools", json::array({{{"name", "f"}}})},
                                     {"tool_choice", json::parse(text)}})["tool_choice"];
  };
  EXPECT_EQ(choice(R"({"type": "auto"})"), "auto");
  EXPECT_EQ(choice(R"({"type": "none"})"), "none");
  EXPECT_EQ(choice(R"({"type": "tool", "name": "f"})"),
            json::parse(R"({"type": "function", "function": {"name": "f"}})"));
}

TEST(AnthropicRequestTest, RefusalsNameTheField) {
  EXPECT_EQ(refused({{"messages", user("x")}}), "max_tokens");  // required, as Anthropic's
  EXPECT_EQ(refused({{"max_tokens", 1}}), "messages");
  EXPECT_EQ(refused({{"max_tokens", 1}, {"messages", json::array()}}), "messages");
  EXPECT_EQ(refused({{"max_tokens", 1},
                     {"messages", json::parse(R"([{"role": "system", "content": "x"}])")}}),
            "messages[0].role");
  EXPECT_EQ(refused({{"max_tokens", 1},
                     {"messages", json::parse(R"([{"role": "user", "content": [{"type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": ""}}]}])")}}),
            "messages[0].content[0]");
  EXPECT_EQ(refused({{"max_tokens", 1},
                     {"messages", json::parse(R"([{"role": "assistant", "content": [{"type":
                        "tool_result", "tool_use_id": "t", "content": "x"}]}])")}}),
            "messages[0].content[0]");
  EXPECT_EQ(refused({{"max_tokens", 1},
                     {"messages", user("x")},
                     {"tools", json::parse(R"([{"type": "web_search_20250305", "name": "w"}])")}}),
            "tools[0]");
  EXPECT_EQ(refused({{"max_tokens", 1}, {"messages", user("x")}, {"stop_sequences", "END"}}),
            "stop_sequences");
  EXPECT_EQ(refused({{"max_tokens", 1}, {"messages", user("x")}, {"tool_choice", "auto"}}),
            "tool_choice");
  // count_tokens does not need max_tokens.
  EXPECT_NO_THROW(chat_body_from_anthropic({{"messages", user("x")}}, /*count_only=*/true));
}

TEST(AnthropicResponseTest, ChatCompletionBecomesAMessage) {
  const json message = anthropic_message(json::parse(R"({
    "id": "chatcmpl-abc123", "object": "chat.completion", "model": "m",
    "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant",
      "content": "Let me look.", "tool_calls": [{"id": "call_xyz", "type": "function",
        "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]}}],
    "usage": {"prompt_tokens": 12, "completion_tokens": 9, "total_tokens": 21}})"));
  EXPECT_EQ(message, json::parse(R"({
    "id": "msg_abc123", "type": "message", "role": "assistant", "model": "m",
    "content": [{"type": "text", "text": "Let me look."},
                {"type": "tool_use", "id": "toolu_xyz", "name": "get_weather",
                 "input": {"city": "Paris"}}],
    "stop_reason": "tool_use", "stop_sequence": null,
    "usage": {"input_tokens": 12, "output_tokens": 9}})"));
  const json cut = anthropic_message(json::parse(R"({"id": "chatcmpl-1", "model": "m",
    "choices": [{"finish_reason": "length", "message": {"content": "Once"}}],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1}})"));
  EXPECT_EQ(cut["stop_reason"], "max_tokens");
  // No text and no calls: no blocks, as Anthropic answers an empty turn.
  const json empty = anthropic_message(json::parse(R"({"id": "chatcmpl-2", "model": "m",
    "choices": [{"finish_reason": "stop", "message": {"content": ""}}],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1}})"));
  EXPECT_EQ(empty["content"], json::array());
  EXPECT_EQ(empty["stop_reason"], "end_turn");
  EXPECT_EQ(empty["stop_sequence"], nullptr);
  // A stop string that matched (vLLM's "stop_reason" beside finish_reason "stop").
  const json stopped = anthropic_message(json::parse(R"({"id": "chatcmpl-3", "model": "m",
    "choices": [{"finish_reason": "stop", "stop_reason": "END", "message": {"content": "a"}}],
    "usage": {"prompt_tokens": 1, "completion_tokens": 2}})"));
  EXPECT_EQ(stopped["stop_reason"], "stop_sequence");
  EXPECT_EQ(stopped["stop_sequence"], "END");
  EXPECT_EQ(cut["content"], json::parse(R"([{"type": "text", "text": "Once"}])"));
}

TEST(AnthropicResponseTest, ErrorsHaveAnthropicsShapeAndTypes) {
  EXPECT_EQ(anthropic_error(400, R"({"error": {"message": "'top_p' must be in [0, 1]",
                                     "type": "invalid_request_error", "param": "top_p"}})"),
            json::parse(R"({"type": "error", "error": {"type": "invalid_request_error",
                            "message": "'top_p' must be in [0, 1]"}})"));
  EXPECT_EQ(anthropic_error(500, "not json")["error"]["message"], "not json");
  EXPECT_STREQ(anthropic_error_type(401), "authentication_error");
  EXPECT_STREQ(anthropic_error_type(403), "permission_error");
  EXPECT_STREQ(anthropic_error_type(404), "not_found_error");
  EXPECT_STREQ(anthropic_error_type(405), "invalid_request_error");
  EXPECT_STREQ(anthropic_error_type(413), "request_too_large");
  EXPECT_STREQ(anthropic_error_type(429), "rate_limit_error");
  EXPECT_STREQ(anthropic_error_type(500), "api_error");
  EXPECT_STREQ(anthropic_error_type(503), "overloaded_error");
}

// Splits "event: X\ndata: {...}\n\n" frames into (X, payload), checking each names its type.
std::vector<json> events_of(const std::string& text) {
  std::vector<json> out;
  size_t at = 0;
  while (at < text.size()) {
    const size_t end = text.find("\n\n", at);
    EXPECT_NE(end, std::string::npos);
    const std::string frame = text.substr(at, end - at);
    at = end + 2;
    const size_t newline = frame.find('\n');
    EXPECT_EQ(frame.rfind("event: ", 0), 0u) << frame;
    EXPECT_EQ(frame.compare(newline + 1, 6, "data: "), 0) << frame;
    json payload = json::parse(frame.substr(newline + 7));
    EXPECT_EQ(payload["type"], frame.substr(7, newline - 7));
    out.push_back(std::move(payload));
  }
  return out;
}

std::string data(const char* chunk) {
  return std::string("data: ") + chunk + "\n\n";
}

TEST(AnthropicStreamTest, TextStreamHasAnthropicsEventSequence) {
  AnthropicStream stream(12);
  std::string out;
  const char* head = R"("id": "chatcmpl-abc", "object": "chat.completion.chunk", "model": "m")";
  for (const std::string& chunk :
       {fmt::format(
            R"({{{}, "choices": [{{"index": 0, "delta": {{"role": "assistant", "content": ""}},
                        "finish_reason": null}}], "usage": null}})",
            head),
        fmt::format(R"({{{}, "choices": [{{"index": 0, "delta": {{"content": "Hello"}},
                        "finish_reason": null}}], "usage": null}})",
                    head),
        fmt::format(R"({{{}, "choices": [{{"index": 0, "delta": {{"content": "!"}},
                        "finish_reason": "length"}}], "usage": null}})",
                    head),
        fmt::format(R"({{{}, "choices": [], "usage": {{"prompt_tokens": 12,
                        "completion_tokens": 2}}}})",
                    head)}) {
    out += stream.translate(data(chunk.c_str()));
  }
  out += stream.translate("data: [DONE]\n\n");
  EXPECT_EQ(stream.translate("data: [DONE]\n\n"), "");  // nothing after message_stop
  const std::vector<json> events = events_of(out);
  ASSERT_EQ(events.size(), 8u) << out;
  EXPECT_EQ(events[0], json::parse(R"({"type": "message_start", "message": {"id": "msg_abc",
      "type": "message", "role": "assistant", "model": "m", "content": [], "stop_reason": null,
      "stop_sequence": null, "usage": {"input_tokens": 12, "output_tokens": 0}}})"));
  EXPECT_EQ(events[1], json::parse(R"({"type": "ping"})"));
  EXPECT_EQ(events[2], json::parse(R"({"type": "content_block_start", "index": 0,
                                       "content_block": {"type": "text", "text": ""}})"));
  EXPECT_EQ(events[3], json::parse(R"({"type": "content_block_delta", "index": 0,
                                       "delta": {"type": "text_delta", "text": "Hello"}})"));
  EXPECT_EQ(events[4]["delta"]["text"], "!");
  EXPECT_EQ(events[5], json::parse(R"({"type": "content_block_stop", "index": 0})"));
  EXPECT_EQ(events[6], json::parse(R"({"type": "message_delta",
      "delta": {"stop_reason": "max_tokens", "stop_sequence": null},
      "usage": {"input_tokens": 12, "output_tokens": 2}})"));
  EXPECT_EQ(events[7], json::parse(R"({"type": "message_stop"})"));
}

TEST(AnthropicStreamTest, ToolCallsBecomeToolUseBlocksWithInputJsonDeltas) {
  AnthropicStream stream(5);
  std::string out = stream.translate(data(R"({"id": "chatcmpl-1", "model": "m", "choices":
      [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": null}]})"));
  out += stream.translate(data(R"({"id": "chatcmpl-1", "model": "m", "choices": [{"index": 0,
      "delta": {"content": "Sure."}, "finish_reason": null}]})"));
  out += stream.translate(data(R"({"id": "chatcmpl-1", "model": "m", "choices": [{"index": 0,
      "delta": {"tool_calls": [{"index": 0, "id": "call_9", "type": "function", "function":
      {"name": "add", "arguments": "{\"a\": 1, \"b\": 2}"}}]}, "finish_reason": null}]})"));
  out += stream.translate(data(R"({"id": "chatcmpl-1", "model": "m", "choices": [{"index": 0,
      "delta": {"content": ""}, "finish_reason": "tool_calls"}]})"));
  out += stream.translate("data: [DONE]\n\n");
  const std::vector<json> events = events_of(out);
  std::vector<std::string> types;
  for (const json& e : events) types.push_back(e["type"]);
  EXPECT_EQ(types, (std::vector<std::string>{
                       "message_start", "ping", "content_block_start", "content_block_delta",
                       "content_block_stop", "content_block_start", "content_block_delta",
                       "content_block_stop", "message_delta", "message_stop"}));
  EXPECT_EQ(events[5], json::parse(R"({"type": "content_block_start", "index": 1,
      "content_block": {"type": "tool_use", "id": "toolu_9", "name": "add", "input": {}}})"));
  EXPECT_EQ(events[6], json::parse(R"({"type": "content_block_delta", "index": 1, "delta":
      {"type": "input_json_delta", "partial_json": "{\"a\":1,\"b\":2}"}})"));
  EXPECT_EQ(events[8]["delta"]["stop_reason"], "tool_use");
}

TEST(AnthropicStreamTest, AMatchedStopStringIsTheStopSequence) {
  AnthropicStream stream(3);
  std::string out = stream.translate(data(R"({"id": "chatcmpl-1", "model": "m", "choices":
      [{"index": 0, "delta": {"role": "assistant", "content": "Hi"}, "finish_reason": null}]})"));
  out += stream.translate(data(R"({"id": "chatcmpl-1", "model": "m", "choices": [{"index": 0,
      "delta": {"content": ""}, "finish_reason": "stop", "stop_reason": "\n\n"}]})"));
  out += stream.translate("data: [DONE]\n\n");
  const std::vector<json> events = events_of(out);
  ASSERT_GE(events.size(), 2u) << out;
  const json& delta = events[events.size() - 2];
  EXPECT_EQ(delta["type"], "message_delta");
  EXPECT_EQ(delta["delta"]["stop_reason"], "stop_sequence");
  EXPECT_EQ(delta["delta"]["stop_sequence"], "\n\n");
}

TEST(AnthropicStreamTest, AnEngineFailureBecomesAnErrorEvent) {
  AnthropicStream stream(1);
  stream.translate(data(R"({"id": "chatcmpl-1", "model": "m", "choices":
      [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": null}]})"));
  const std::vector<json> events = events_of(stream.translate(
      data(R"({"error": {"message": "boom", "type": "server_error", "code": "engine_error"}})")));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0], json::parse(R"({"type": "error", "error": {"type": "api_error",
                                       "message": "boom"}})"));
  EXPECT_EQ(stream.translate("data: [DONE]\n\n"), "");
}

}  // namespace
}  // namespace rapide::api
