#include "engine/tool_call_parser.h"

#include <nlohmann/json.hpp>

#include <random>

namespace rapide {

using nlohmann::json;

namespace {

constexpr std::string_view kHermesOpen = "<tool_call>";
constexpr std::string_view kHermesClose = "</tool_call>";
constexpr std::string_view kPythonTag = "<|python_tag|>";
constexpr std::string_view kMistralTag = "[TOOL_CALLS]";

std::string call_id() {
  static constexpr char kAlphabet[] =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  static thread_local std::mt19937_64 rng(std::random_device{}());
  std::string id = "call_";
  for (int i = 0; i < 24; ++i) id += kAlphabet[rng() % (sizeof kAlphabet - 1)];
  return id;
}

std::string_view trim(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return {};
  const size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

// {"name": "...", "arguments"|"parameters": {...} or "..."} -> a call.
std::optional<ToolCall> call_from_json(const json& j) {
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return std::nullopt;
  ToolCall call;
  call.id = call_id();
  call.name = j["name"].get<std::string>();
  const json* args = nullptr;
  for (const char* key : {"arguments", "parameters"}) {
    if (j.contains(key)) args = &j[key];
  }
  if (args == nullptr)
    call.arguments = "{}";
  else if (args->is_string())
    call.arguments = args->get<std::string>();
  else
    call.arguments = args->dump();
  return call;
}

// One call object or a list of them; nullopt unless every element is a call.
std::optional<std::vector<ToolCall>> calls_from_json_text(std::string_view text) {
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return std::nullopt;
  std::vector<ToolCall> calls;
  const json list = j.is_array() ? j : json::array({j});
  if (list.empty()) return std::nullopt;
  for (const json& item : list) {
    auto call = call_from_json(item);
    if (!call) return std::nullopt;
    calls.push_back(std::move(*call));
  }
  return calls;
}

ParsedToolCalls parse_hermes(std::string_view text) {
  ParsedToolCalls out;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t open = text.find(kHermesOpen, pos);
    if (open == std::string_view::npos) break;
    const size_t body = open + kHermesOpen.size();
    const size_t close = text.find(kHermesClose, body);
    // An unclosed last call (cut by max_tokens or a stop) still counts if its JSON is whole.
    const std::string_view inner =
        text.substr(body, close == std::string_view::npos ? std::string_view::npos : close - body);
    auto calls = calls_from_json_text(trim(inner));
    if (!calls) break;
    out.content += text.substr(pos, open - pos);
    for (ToolCall& c : *calls) out.calls.push_back(std::move(c));
    pos = close == std::string_view::npos ? text.size() : close + kHermesClose.size();
  }
  out.content += text.substr(pos);
  return out;
}

ParsedToolCalls parse_whole(ToolCallFormat format, std::string_view text) {
  ParsedToolCalls out;
  std::string_view body = trim(text);
  if (format == ToolCallFormat::kLlama3 && body.starts_with(kPythonTag))
    body = trim(body.substr(kPythonTag.size()));
  if (format == ToolCallFormat::kMistral && body.starts_with(kMistralTag))
    body = trim(body.substr(kMistralTag.size()));
  std::optional<std::vector<ToolCall>> calls;
  if (format == ToolCallFormat::kLlama3 && body.find(';') != std::string_view::npos) {
    // Several calls separated by ';' (a ';' inside a string makes the split fail: then whole).
    std::vector<ToolCall> all;
    bool ok = true;
    size_t start = 0;
    while (ok && start <= body.size()) {
      size_t end = body.find(';', start);
      if (end == std::string_view::npos) end = body.size();
      auto part = calls_from_json_text(trim(body.substr(start, end - start)));
      if (!part)
        ok = false;
      else
        for (ToolCall& c : *part) all.push_back(std::move(c));
      start = end + 1;
    }
    if (ok) calls = std::move(all);
  }
  if (!calls) calls = calls_from_json_text(body);
  if (!calls) {
    out.content = std::string(text);
    return out;
  }
  out.calls = std::move(*calls);
  return out;
}

// Whether `text` ends with a proper prefix of `marker` (which may still complete).
size_t partial_suffix(std::string_view text, std::string_view marker) {
  for (size_t n = std::min(text.size(), marker.size() - 1); n > 0; --n) {
    if (text.substr(text.size() - n) == marker.substr(0, n)) return n;
  }
  return 0;
}

}  // namespace

const char* tool_call_format_name(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::kHermes:
      return "hermes";
    case ToolCallFormat::kLlama3:
      return "llama3";
    case ToolCallFormat::kMistral:
      return "mistral";
    case ToolCallFormat::kJson:
      return "json";
  }
  return "json";
}

std::optional<ToolCallFormat> tool_call_format_from_name(std::string_view name) {
  for (const ToolCallFormat f : {ToolCallFormat::kHermes, ToolCallFormat::kLlama3,
                                 ToolCallFormat::kMistral, ToolCallFormat::kJson}) {
    if (name == tool_call_format_name(f)) return f;
  }
  return std::nullopt;
}

ToolCallFormat tool_call_format_of_template(std::string_view source) {
  if (source.find(kHermesOpen) != std::string_view::npos) return ToolCallFormat::kHermes;
  if (source.find(kMistralTag) != std::string_view::npos) return ToolCallFormat::kMistral;
  if (source.find(kPythonTag) != std::string_view::npos ||
      source.find("ipython") != std::string_view::npos) {
    return ToolCallFormat::kLlama3;
  }
  return ToolCallFormat::kJson;
}

ParsedToolCalls parse_tool_calls(ToolCallFormat format, std::string_view text) {
  return format == ToolCallFormat::kHermes ? parse_hermes(text) : parse_whole(format, text);
}

std::string ToolCallStream::push(std::string_view text) {
  text_ += text;
  if (holding_) return {};
  std::string_view all = text_;
  size_t safe = all.size();
  if (format_ == ToolCallFormat::kHermes) {
    const size_t open = all.find(kHermesOpen, emitted_);
    if (open != std::string_view::npos) {
      safe = open;
      holding_ = true;
    } else {
      safe = all.size() - partial_suffix(all, kHermesOpen);
    }
  } else {
    // A call is the whole output: hold while it could start one.
    const std::string_view t = trim(all);
    const bool may_be_call = t.empty() || t[0] == '{' || t[0] == '[' ||
                             kPythonTag.starts_with(t.substr(0, kPythonTag.size())) ||
                             t.starts_with(kPythonTag);
    if (may_be_call && emitted_ == 0) {
      holding_ = !t.empty();
      return {};
    }
  }
  std::string out(all.substr(emitted_, safe - emitted_));
  emitted_ = safe;
  return out;
}

ParsedToolCalls ToolCallStream::finish() const {
  ParsedToolCalls parsed = parse_tool_calls(format_, text_);
  if (parsed.calls.empty()) {
    parsed.content = text_.substr(emitted_);
    return parsed;
  }
  // The content already sent is a prefix of the output before the first call.
  parsed.content = emitted_ <= parsed.content.size() ? parsed.content.substr(emitted_) : "";
  return parsed;
}

}  // namespace rapide
