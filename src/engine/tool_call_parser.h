// Tool calls in model output: which format a model writes its calls in, parsing the output
// into calls, and the stream filter that holds back text that may turn out to be a call.
// The engine's OutputProcessor runs it for a request that asks (Request::tool_calls), so a
// client sees content without the calls' text and the calls on the final event, whichever
// front end (OpenAI, Anthropic, llama-server, `rapide batch`) serves it.
//
// Formats (chosen from the chat template, or `rapide serve --tool-call-parser`):
//   hermes   <tool_call>{"name": ..., "arguments": {...}}</tool_call>, any number, with text
//            around them (Hermes, Qwen 2/2.5/3)
//   llama3   {"name": ..., "parameters": {...}} as the whole output, optionally after
//            <|python_tag|>, several separated by ';' (Llama 3.1+ JSON tool calling)
//   mistral  [TOOL_CALLS] [{"name": ..., "arguments": {...}}, ...] ([TOOL_CALLS] is a control
//            token, so the text may start at the list)
//   json     the whole output is {"name", "arguments"} or a list of them (any other model)
// The stream's finish() parses the same full text with parse_tool_calls, so streamed and
// non-streamed responses always agree.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rapide {

enum class ToolCallFormat { kHermes, kLlama3, kMistral, kJson };

// "hermes", "llama3", "mistral", "json".
const char* tool_call_format_name(ToolCallFormat format);
std::optional<ToolCallFormat> tool_call_format_from_name(std::string_view name);
// The format a chat template renders tool calls in (kJson when it shows none).
ToolCallFormat tool_call_format_of_template(std::string_view template_source);

struct ToolCall {
  std::string id;  // "call_" + 24 random characters
  std::string name;
  std::string arguments;  // a JSON object, serialized
};

struct ParsedToolCalls {
  std::string content;  // the text outside the calls
  std::vector<ToolCall> calls;
};

// Splits model output into content and calls. Text that does not parse as a call of the
// format stays content (a model may also answer in prose).
ParsedToolCalls parse_tool_calls(ToolCallFormat format, std::string_view text);

// Streaming: passes text through until it may be the start of a call, then holds it.
class ToolCallStream {
 public:
  explicit ToolCallStream(ToolCallFormat format) : format_(format) {}
  // The part of the output so far that can be shown as content now.
  std::string push(std::string_view text);
  // At the end: the held text's remaining content and every call of the whole output.
  ParsedToolCalls finish() const;

 private:
  ToolCallFormat format_;
  std::string text_;
  size_t emitted_ = 0;
  bool holding_ = false;
};

}  // namespace rapide
