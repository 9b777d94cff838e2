#include "api/anthropic_messages.h"

#include <fmt/format.h>

#include <string_view>

#include "api/api_error.h"

namespace rapide::api {

using nlohmann::json;

namespace {

[[noreturn]] void bad(const std::string& param, const std::string& message,
                      const char* code = "invalid_value") {
  throw ApiError(400, message, param, code);
}

// The field's value, or nullptr when absent or null.
const json* field(const json& body, const char* key) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

// Whether `v` is a non-empty string (json::empty() is false for every string).
bool is_text(const json* v) {
  return v && v->is_string() && !v->get_ref<const std::string&>().empty();
}

std::string type_of(const json& block) {
  const json* t = block.is_object() ? field(block, "type") : nullptr;
  return t && t->is_string() ? t->get<std::string>() : std::string();
}

// A text block's text; 400 naming `where` for any other block.
std::string text_of_block(const json& block, const std::string& where) {
  if (type_of(block) != "text" || !block.contains("text") || !block["text"].is_string()) {
    bad(where, fmt::format("{} must be a text block {{\"type\": \"text\", \"text\": ...}}; "
                           "only text, tool_use and tool_result blocks are supported",
                           where));
  }
  return block["text"].get<std::string>();
}

// system or tool_result content: a string or a list of text blocks.
std::string text_of(const json& content, const std::string& where) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) bad(where, where + " must be a string or a list of text blocks");
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    if (!text.empty()) text += "\n";
    text += text_of_block(content[i], fmt::format("{}[{}]", where, i));
  }
  return text;
}

// One Anthropic message -> the chat messages it stands for (a user turn with tool results
// becomes one "tool" message per result, then the user's text, if any).
void add_message(const json& m, size_t index, json& out) {
  const std::string where = fmt::format("messages[{}]", index);
  if (!m.is_object()) bad(where, where + " must be an object with 'role' and 'content'");
  const json* role = field(m, "role");
  if (!role || !role->is_string() || (*role != "user" && *role != "assistant")) {
    bad(where + ".role", where + ".role must be \"user\" or \"assistant\"");
  }
  const bool assistant = *role == "assistant";
  const json* content = field(m, "content");
  if (!content) bad(where + ".content", where + ".content is required");
  if (content->is_string()) {
    out.push_back({{"role", *role}, {"content", *content}});
    return;
  }
  if (!content->is_array()) {
    bad(where + ".content", where + ".content must be a string or a list of content blocks");
  }
  std::string text;
  json tool_calls = json::array();
  json tool_messages = json::array();
  for (size_t i = 0; i < content->size(); ++i) {
    const json& block = (*content)[i];
    const std::string at = fmt::format("{}.content[{}]", where, i);
    const std::string type = type_of(block);
    if (type == "tool_use" && assistant) {
      const json* id = field(block, "id");
      const json* name = field(block, "name");
      const json* input = field(block, "input");
      if (!id || !id->is_string() || !name || !name->is_string() ||
          (input && !input->is_object())) {
        bad(at, at + " must be {\"type\": \"tool_use\", \"id\", \"name\", \"input\": {...}}");
      }
      tool_calls.push_back(
          {{"id", *id},
           {"type", "function"},
           {"function", {{"name", *name}, {"arguments", input ? input->dump() : "{}"}}}});
    } else if (type == "tool_result" && !assistant) {
      const json* id = field(block, "tool_use_id");
      if (!id || !id->is_string()) bad(at, at + ".tool_use_id must be a string");
      const json* result = field(block, "content");
      tool_messages.push_back({{"role", "tool"},
                               {"tool_call_id", *id},
                               {"content", result ? text_of(*result, at + ".content") : ""}});
    } else if (type == "tool_use" || type == "tool_result") {
      bad(at, fmt::format("{} is a {} block, which belongs in {} messages", at, type,
                          type == "tool_use" ? "assistant" : "user"));
    } else {
      text += text_of_block(block, at);
    }
  }
  for (json& t : tool_messages) out.push_back(std::move(t));
  if (assistant) {
    json message = {{"role", "assistant"}, {"content", text}};
    if (!tool_calls.empty()) message["tool_calls"] = std::move(tool_calls);
    out.push_back(std::move(message));
  } else if (!text.empty() || tool_messages.empty()) {
    out.push_back({{"role", "user"}, {"content", text}});
  }
}

json chat_tools(const json& tools) {
  if (!tools.is_array()) bad("tools", "'tools' must be a list");
  json out = json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const json& t = tools[i];
    const std::string where = fmt::format("tools[{}]", i);
    if (!t.is_object() || !t.contains("name") || !t["name"].is_string()) {
      bad(where, where + " must be {\"name\", \"description\", \"input_schema\": {...}}");
    }
    const std::string type = type_of(t);
    if (!type.empty() && type != "custom") {
      bad(where,
          fmt::format("{} is the server tool '{}', which this server does not run; only "
                      "client tools (name, description, input_schema) are supported",
                      where, type),
          "unsupported");
    }
    json function = {{"name", t["name"]}};
    if (const json* d = field(t, "description")) function["description"] = *d;
    const json* schema = field(t, "input_schema");
    if (schema && !schema->is_object()) bad(where, where + ".input_schema must be an object");
    function["parameters"] = schema ? *schema : json{{"type", "object"}};
    out.push_back({{"type", "function"}, {"function", std::move(function)}});
  }
  return out;
}

void add_tool_choice(const json& choice, json& out) {
  const std::string type = type_of(choice);
  if (type == "auto") {
    out["tool_choice"] = "auto";
  } else if (type == "any") {
    out["tool_choice"] = "required";
  } else if (type == "none") {
    out["tool_choice"] = "none";
  } else if (type == "tool" && choice.contains("name") && choice["name"].is_string()) {
    out["tool_choice"] = {{"type", "function"}, {"function", {{"name", choice["name"]}}}};
  } else {
    bad("tool_choice",
        "'tool_choice' must be {\"type\": \"auto\" | \"any\" | \"none\"} or {\"type\": "
        "\"tool\", \"name\": ...}");
  }
  if (const json* p = field(choice, "disable_parallel_tool_use")) {
    if (!p->is_boolean())
      bad("tool_choice", "'tool_choice.disable_parallel_tool_use' must be a boolean");
    out["parallel_tool_calls"] = !p->get<bool>();
  }
}

std::string message_id(const json& chat) {
  std::string id = chat.value("id", std::string("chatcmpl-0"));
  if (const size_t dash = id.find('-'); dash != std::string::npos) id = id.substr(dash + 1);
  return "msg_" + id;
}

std::string tool_use_id(const std::string& call_id) {
  return call_id.starts_with("call_") ? "toolu_" + call_id.substr(5) : call_id;
}

// Anthropic's stop_reason from a chat choice: a stop string that matched (vLLM's
// "stop_reason" beside finish_reason "stop") is "stop_sequence".
const char* stop_reason(const json& choice) {
  const json finish = choice.value("finish_reason", json());
  if (finish == "length") return "max_tokens";
  if (finish == "tool_calls") return "tool_use";
  if (finish == "stop" && choice.value("stop_reason", json()).is_string()) return "stop_sequence";
  return "end_turn";
}

// The stop_sequence field: the matched string, null otherwise.
json stop_sequence(const json& choice) {
  const json matched = choice.value("stop_reason", json());
  return choice.value("finish_reason", json()) == "stop" && matched.is_string() ? matched : json();
}

json tool_input(const json& call) {
  const json parsed = json::parse(call["function"].value("arguments", std::string("{}")), nullptr,
                                  /*allow_exceptions=*/false);
  return parsed.is_object() ? parsed : json::object();
}

std::string event(const json& payload) {
  return fmt::format("event: {}\ndata: {}\n\n", payload["type"].get<std::string>(),
                     payload.dump(-1, ' ', false, json::error_handler_t::replace));
}

}  // namespace

json chat_body_from_anthropic(const json& body, bool count_only) {
  if (!body.is_object()) throw ApiError(400, "the request body must be a JSON object");
  json out = json::object();
  for (const char* key : {"model", "temperature", "top_p", "top_k"}) {
    if (const json* v = field(body, key)) out[key] = *v;
  }
  if (!count_only) {
    const json* max_tokens = field(body, "max_tokens");
    if (!max_tokens) bad("max_tokens", "'max_tokens' is required", "missing_field");
    out["max_tokens"] = *max_tokens;
  }
  if (const json* stops = field(body, "stop_sequences")) {
    if (!stops->is_array()) bad("stop_sequences", "'stop_sequences' must be a list of strings");
    for (const json& s : *stops) {
      if (!s.is_string()) bad("stop_sequences", "'stop_sequences' must be a list of strings");
    }
    out["stop"] = *stops;
  }
  if (const json* stream = field(body, "stream"); stream && !count_only) {
    out["stream"] = *stream;
    // The usage chunk gives message_delta its output_tokens.
    if (*stream == true) out["stream_options"] = {{"include_usage", true}};
  }
  json messages = json::array();
  if (const json* system = field(body, "system")) {
    messages.push_back({{"role", "system"}, {"content", text_of(*system, "system")}});
  }
  const json* given = field(body, "messages");
  if (!given || !given->is_array() || given->empty()) {
    bad("messages", "'messages' must be a non-empty list");
  }
  for (size_t i = 0; i < given->size(); ++i) add_message((*given)[i], i, messages);
  out["messages"] = std::move(messages);
  if (const json* tools = field(body, "tools")) out["tools"] = chat_tools(*tools);
  if (const json* choice = field(body, "tool_choice")) add_tool_choice(*choice, out);
  return out;
}

json anthropic_message(const json& chat) {
  const json& choice = chat.at("choices").at(0);
  const json& message = choice.at("message");
  json content = json::array();
  if (const json* text = field(message, "content"); is_text(text)) {
    content.push_back({{"type", "text"}, {"text", *text}});
  }
  if (const json* calls = field(message, "tool_calls")) {
    for (const json& call : *calls) {
      content.push_back({{"type", "tool_use"},
                         {"id", tool_use_id(call.value("id", std::string()))},
                         {"name", call["function"]["name"]},
                         {"input", tool_input(call)}});
    }
  }
  const json& usage = chat.at("usage");
  return {{"id", message_id(chat)},
          {"type", "message"},
          {"role", "assistant"},
          {"model", chat.value("model", std::string())},
          {"content", std::move(content)},
          {"stop_reason", stop_reason(choice)},
          {"stop_sequence", stop_sequence(choice)},
          {"usage",
           {{"input_tokens", usage.value("prompt_tokens", 0)},
            {"output_tokens", usage.value("completion_tokens", 0)}}}};
}

const char* anthropic_error_type(int status) {
  switch (status) {
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 413:
      return "request_too_large";
    case 429:
      return "rate_limit_error";
    case 503:
    case 529:
      return "overloaded_error";
    default:
      return status >= 500 ? "api_error" : "invalid_request_error";
  }
}

json anthropic_error(int status, const std::string& openai_body) {
  const json parsed = json::parse(openai_body, nullptr, /*allow_exceptions=*/false);
  std::string message = openai_body;
  if (parsed.is_object() && parsed.contains("error") && parsed["error"].is_object() &&
      parsed["error"].contains("message") && parsed["error"]["message"].is_string()) {
    message = parsed["error"]["message"].get<std::string>();
  }
  return {{"type", "error"},
          {"error", {{"type", anthropic_error_type(status)}, {"message", message}}}};
}

std::string AnthropicStream::translate(const std::string& frame) {
  if (finished_) return {};
  std::string_view payload(frame);
  if (payload.starts_with("data: ")) payload.remove_prefix(6);
  while (!payload.empty() && payload.back() == '\n') payload.remove_suffix(1);
  if (payload == "[DONE]") return finish();
  const json parsed = json::parse(payload, nullptr, /*allow_exceptions=*/false);
  if (!parsed.is_object()) return {};
  if (parsed.contains("error")) {  // the engine failed mid-stream
    finished_ = true;
    const int status = parsed["error"].value("code", std::string()) == "unavailable" ? 503 : 500;
    return event(anthropic_error(status, parsed.dump()));
  }
  return chunk(parsed);
}

std::string AnthropicStream::chunk(const json& c) {
  std::string out;
  if (!started_) {
    started_ = true;
    out += event({{"type", "message_start"},
                  {"message",
                   {{"id", message_id(c)},
                    {"type", "message"},
                    {"role", "assistant"},
                    {"model", c.value("model", std::string())},
                    {"content", json::array()},
                    {"stop_reason", nullptr},
                    {"stop_sequence", nullptr},
                    {"usage", {{"input_tokens", input_tokens_}, {"output_tokens", 0}}}}}});
    out += event({{"type", "ping"}});
  }
  if (const json* usage = field(c, "usage")) {
    output_tokens_ = usage->value("completion_tokens", output_tokens_);
    input_tokens_ = usage->value("prompt_tokens", input_tokens_);
  }
  const json* choices = field(c, "choices");
  if (!choices || !choices->is_array() || choices->empty()) return out;
  const json& choice = (*choices)[0];
  const json& delta = choice.value("delta", json::object());
  if (const json* text = field(delta, "content"); is_text(text)) {
    out += open_text();
    out += event({{"type", "content_block_delta"},
                  {"index", blocks_ - 1},
                  {"delta", {{"type", "text_delta"}, {"text", *text}}}});
  }
  if (const json* calls = field(delta, "tool_calls")) {
    out += close_block();
    for (const json& call : *calls) {
      const int index = blocks_++;
      out += event({{"type", "content_block_start"},
                    {"index", index},
                    {"content_block",
                     {{"type", "tool_use"},
                      {"id", tool_use_id(call.value("id", std::string()))},
                      {"name", call["function"]["name"]},
                      {"input", json::object()}}}});
      out += event(
          {{"type", "content_block_delta"},
           {"index", index},
           {"delta", {{"type", "input_json_delta"}, {"partial_json", tool_input(call).dump()}}}});
      out += event({{"type", "content_block_stop"}, {"index", index}});
    }
  }
  if (const json* reason = field(choice, "finish_reason"); reason && !reason->is_null()) {
    stop_reason_ = stop_reason(choice);
    stop_sequence_ = stop_sequence(choice);
    out += close_block();
  }
  return out;
}

std::string AnthropicStream::open_text() {
  if (block_open_) return {};
  block_open_ = true;
  return event({{"type", "content_block_start"},
                {"index", blocks_++},
                {"content_block", {{"type", "text"}, {"text", ""}}}});
}

std::string AnthropicStream::close_block() {
  if (!block_open_) return {};
  block_open_ = false;
  return event({{"type", "content_block_stop"}, {"index", blocks_ - 1}});
}

std::string AnthropicStream::finish() {
  finished_ = true;
  std::string out = close_block();
  out += event({{"type", "message_delta"},
                {"delta", {{"stop_reason", stop_reason_}, {"stop_sequence", stop_sequence_}}},
                {"usage", {{"input_tokens", input_tokens_}, {"output_tokens", output_tokens_}}}});
  out += event({{"type", "message_stop"}});
  return out;
}

}  // namespace rapide::api
