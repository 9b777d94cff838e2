// Tool-call parsers on outputs recorded from models of each format (Hermes 2 Pro / Qwen 2.5,
// Llama 3.1, Mistral 7B v0.3, and plain JSON), the stream filter agreeing with the
// whole-text parse, and the forcing grammar accepting exactly calls of the given tools.
#include <gtest/gtest.h>

#include "api/tool_calls.h"
#include "grammar/gbnf.h"
#include "unit/grammar/grammar_matches.h"

namespace rapide::api {
namespace {

using nlohmann::json;

void expect_call(const ToolCall& call, const char* name, const char* arguments) {
  EXPECT_EQ(call.name, name);
  EXPECT_EQ(json::parse(call.arguments), json::parse(arguments));
  EXPECT_TRUE(call.id.starts_with("call_"));
  EXPECT_EQ(call.id.size(), 29u);
}

TEST(ToolCalls, HermesQwen) {
  const std::string out =
      "<tool_call>\n{\"name\": \"get_current_temperature\", \"arguments\": {\"location\": "
      "\"San Francisco, CA, USA\"}}\n</tool_call>\n<tool_call>\n{\"name\": "
      "\"get_temperature_date\", \"arguments\": {\"location\": \"San Francisco, CA, USA\", "
      "\"date\": \"2024-10-01\"}}\n</tool_call>";
  const ParsedToolCalls p = parse_tool_calls(ToolCallFormat::kHermes, out);
  ASSERT_EQ(p.calls.size(), 2u);
  expect_call(p.calls[0], "get_current_temperature", R"({"location": "San Francisco, CA, USA"})");
  expect_call(p.calls[1], "get_temperature_date",
              R"({"location": "San Francisco, CA, USA", "date": "2024-10-01"})");
  EXPECT_EQ(p.content.find_first_not_of("\n"), std::string::npos);
  EXPECT_NE(p.calls[0].id, p.calls[1].id);
}

TEST(ToolCalls, HermesWithTextAndBrokenCall) {
  const ParsedToolCalls p = parse_tool_calls(
      ToolCallFormat::kHermes,
      "Let me check.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.content, "Let me check.\n");
  const ParsedToolCalls broken =
      parse_tool_calls(ToolCallFormat::kHermes, "<tool_call>\n{\"name\": \"f\", \"argu");
  EXPECT_TRUE(broken.calls.empty());
  EXPECT_EQ(broken.content, "<tool_call>\n{\"name\": \"f\", \"argu");
}

TEST(ToolCalls, Llama3Json) {
  const ParsedToolCalls p = parse_tool_calls(
      ToolCallFormat::kLlama3,
      "{\"name\": \"get_current_conditions\", \"parameters\": {\"location\": \"San Francisco, "
      "CA\", \"unit\": \"Fahrenheit\"}}");
  ASSERT_EQ(p.calls.size(), 1u);
  expect_call(p.calls[0], "get_current_conditions",
              R"({"location": "San Francisco, CA", "unit": "Fahrenheit"})");
  const ParsedToolCalls tagged = parse_tool_calls(
      ToolCallFormat::kLlama3,
      "<|python_tag|>{\"name\": \"a\", \"parameters\": {\"x\": 1}}; {\"name\": \"b\", "
      "\"parameters\": {}}");
  ASSERT_EQ(tagged.calls.size(), 2u);
  expect_call(tagged.calls[1], "b", "{}");
  EXPECT_TRUE(parse_tool_calls(ToolCallFormat::kLlama3, "The answer is 4.").calls.empty());
}

TEST(ToolCalls, Mistral) {
  const char* recorded =
      "[TOOL_CALLS] [{\"name\": \"get_current_weather\", \"arguments\": {\"location\": "
      "\"Paris, France\", \"format\": \"celsius\"}}]";
  const ParsedToolCalls p = parse_tool_calls(ToolCallFormat::kMistral, recorded);
  ASSERT_EQ(p.calls.size(), 1u);
  expect_call(p.calls[0], "get_current_weather",
              R"({"location": "Paris, France", "format": "celsius"})");
  // [TOOL_CALLS] is a control token: detokenized text starts at the list.
  const ParsedToolCalls bare =
      parse_tool_calls(ToolCallFormat::kMistral,
                       " [{\"name\": \"a\", \"arguments\": {}}, {\"name\": \"b\", "
                       "\"arguments\": {\"q\": \"x\"}}]");
  ASSERT_EQ(bare.calls.size(), 2u);
  expect_call(bare.calls[1], "b", R"({"q": "x"})");
}

TEST(ToolCalls, GenericJsonAndStringArguments) {
  const ParsedToolCalls p = parse_tool_calls(
      ToolCallFormat::kJson, "{\"name\": \"add\", \"arguments\": \"{\\\"a\\\": 1}\"}");
  ASSERT_EQ(p.calls.size(), 1u);
  expect_call(p.calls[0], "add", R"({"a": 1})");
  const ParsedToolCalls prose = parse_tool_calls(ToolCallFormat::kJson, "{not json");
  EXPECT_TRUE(prose.calls.empty());
  EXPECT_EQ(prose.content, "{not json");
}

TEST(ToolCalls, FormatFromTemplate) {
  EXPECT_EQ(tool_call_format_of_template("{{- '<tool_call>\\n' }}"), ToolCallFormat::kHermes);
  EXPECT_EQ(tool_call_format_of_template("{{ '[TOOL_CALLS] ' }}"), ToolCallFormat::kMistral);
  EXPECT_EQ(tool_call_format_of_template("<|start_header_id|>ipython"), ToolCallFormat::kLlama3);
  EXPECT_EQ(tool_call_format_of_template("{{ messages }}"), ToolCallFormat::kJson);
  EXPECT_EQ(tool_call_format_from_name("hermes"), ToolCallFormat::kHermes);
  EXPECT_FALSE(tool_call_format_from_name("xml"));
}

// Feeding the output in pieces shows content before the call and nothing of the call; the
// final parse gives the same calls as the whole-text parse.
TEST(ToolCalls, StreamHoldsBackCalls) {
  const std::string out =
      "Sure. <tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>";
  ToolCallStream stream(ToolCallFormat::kHermes);
  std::string shown;
  for (size_t i = 0; i < out.size(); i += 3) shown += stream.push(out.substr(i, 3));
  EXPECT_EQ(shown, "Sure. ");
  const ParsedToolCalls end = stream.finish();
  const ParsedToolCalls whole = parse_tool_calls(ToolCallFormat::kHermes, out);
  ASSERT_EQ(end.calls.size(), 1u);
  EXPECT_EQ(end.calls[0].arguments, whole.calls[0].arguments);
  EXPECT_EQ(shown + end.content, whole.content);

  ToolCallStream prose(ToolCallFormat::kJson);
  EXPECT_EQ(prose.push("Hello"), "Hello");
  EXPECT_EQ(prose.push(" {x}"), " {x}");
  EXPECT_TRUE(prose.finish().calls.empty());
  ToolCallStream call(ToolCallFormat::kJson);
  EXPECT_EQ(call.push(" {\"name\": \"f\","), "");
  EXPECT_EQ(call.push(" \"arguments\": {}}"), "");
  EXPECT_EQ(call.finish().calls.size(), 1u);
}

bool grammar_accepts(const std::string& gbnf, const std::string& text) {
  return grammar::matches(grammar::parse_gbnf(gbnf), text);
}

TEST(ToolCalls, ForcingGrammarFollowsParameterSchemas) {
  const json tools = json::parse(R"([
    {"type": "function", "function": {"name": "add", "parameters": {"type": "object",
      "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}}},
    {"type": "function", "function": {"name": "now"}}])");
  const std::string hermes = tool_call_gbnf(ToolCallFormat::kHermes, tools, "", true);
  EXPECT_TRUE(grammar_accepts(
      hermes,
      "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}\n</tool_call>"));
  EXPECT_TRUE(grammar_accepts(
      hermes,
      "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": "
      "\"now\", \"arguments\": {}}\n</tool_call>"));
  EXPECT_FALSE(grammar_accepts(
      hermes, "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1}}\n</tool_call>"));
  const std::string named = tool_call_gbnf(ToolCallFormat::kLlama3, tools, "add", false);
  EXPECT_TRUE(grammar_accepts(named, "{\"name\": \"add\", \"parameters\": {\"a\": 1, \"b\": 2}}"));
  EXPECT_FALSE(grammar_accepts(named, "{\"name\": \"now\", \"parameters\": {}}"));
  const std::string mistral = tool_call_gbnf(ToolCallFormat::kMistral, tools, "", false);
  EXPECT_TRUE(grammar_accepts(mistral, "[{\"name\": \"now\", \"arguments\": {}}]"));
  // What the grammar forces parses back into the same call.
  const ParsedToolCalls p =
      parse_tool_calls(ToolCallFormat::kMistral, "[{\"name\": \"now\", \"arguments\": {}}]");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].name, "now");
}

}  // namespace
}  // namespace rapide::api
