#include "api/tool_calls.h"

#include "base/error.h"
#include "grammar/json_grammar.h"

namespace rapide::api {

using nlohmann::json;

json tool_calls_json(const std::vector<ToolCall>& calls) {
  json list = json::array();
  for (const ToolCall& c : calls) {
    list.push_back({{"id", c.id},
                    {"type", "function"},
                    {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
  }
  return list;
}

std::string tool_call_gbnf(ToolCallFormat format, const json& tools, const std::string& only,
                           bool parallel) {
  std::string rules;
  std::vector<std::string> alternatives;
  const char* args_key = format == ToolCallFormat::kLlama3 ? "parameters" : "arguments";
  for (const json& tool : tools) {
    const json& fn = tool.at("function");
    const std::string name = fn.at("name").get<std::string>();
    if (!only.empty() && name != only) continue;
    const json params = fn.contains("parameters") && !fn["parameters"].is_null()
                            ? fn["parameters"]
                            : json{{"type", "object"}};
    const std::string args =
        grammar::add_json_schema_rules(params, fmt::format("tool{}-", alternatives.size()), rules);
    alternatives.push_back(grammar::gbnf_literal(fmt::format(
                               "{{\"name\": {}, \"{}\": ", json(name).dump(), args_key)) +
                           " " + args + " \"}\"");
  }
  if (alternatives.empty()) fail(ErrorCode::kInvalidArgument, "no tool named '{}'", only);
  std::string call = "call ::= ";
  for (size_t i = 0; i < alternatives.size(); ++i) call += (i ? " | " : "") + alternatives[i];
  std::string root;
  switch (format) {
    case ToolCallFormat::kHermes:
      root = R"(root ::= "<tool_call>\n" call "\n</tool_call>")";
      if (parallel) root += R"( ("\n<tool_call>\n" call "\n</tool_call>")*)";
      break;
    case ToolCallFormat::kMistral:
      root = parallel ? R"(root ::= "[" call (", " call)* "]")" : R"(root ::= "[" call "]")";
      break;
    case ToolCallFormat::kLlama3:
      root = "root ::= call";
      break;
    case ToolCallFormat::kJson:
      root = parallel ? R"(root ::= call | "[" call (", " call)* "]")" : "root ::= call";
      break;
  }
  return root + "\n" + call + rules;
}

}  // namespace rapide::api
