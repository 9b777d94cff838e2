// Tool calling on the API side: OpenAI's `tool_calls` list of parsed calls, and the grammar
// that forces a call (tool_choice "required" or a named function). The formats, parsing and
// the streaming hold-back are the engine's (engine/tool_call_parser.h).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/tool_call_parser.h"

namespace rapide::api {

using rapide::parse_tool_calls;
using rapide::ParsedToolCalls;
using rapide::tool_call_format_from_name;
using rapide::tool_call_format_name;
using rapide::tool_call_format_of_template;
using rapide::ToolCall;
using rapide::ToolCallFormat;

// OpenAI's message.tool_calls list.
nlohmann::json tool_calls_json(const std::vector<ToolCall>& calls);

// GBNF text whose sentences are calls, in `format`, of the functions of `tools` (OpenAI's
// tools list) whose arguments follow each function's parameter schema; only `only` when
// non-empty (a named tool_choice); several calls when `parallel` (not for llama3).
// Throws Error for an unsupported parameter schema.
std::string tool_call_gbnf(ToolCallFormat format, const nlohmann::json& tools,
                           const std::string& only, bool parallel);

}  // namespace rapide::api
