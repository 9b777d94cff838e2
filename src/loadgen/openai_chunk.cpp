#include "loadgen/openai_chunk.h"

#include <nlohmann/json.hpp>

namespace rapide::loadgen {

namespace {

std::string error_text(const nlohmann::json& error) {
  if (error.is_string()) return error.get<std::string>();
  if (error.is_object() && error.contains("message") && error["message"].is_string()) {
    return error["message"].get<std::string>();
  }
  return error.dump();
}

}  // namespace

StreamChunk parse_stream_chunk(const std::string& data) {
  StreamChunk chunk;
  if (data == "[DONE]") {
    chunk.kind = StreamChunk::Kind::kDone;
    return chunk;
  }
  const nlohmann::json j = nlohmann::json::parse(data, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    chunk.kind = StreamChunk::Kind::kMalformed;
    chunk.error = "not a JSON object: " + data.substr(0, 120);
    return chunk;
  }
  if (j.contains("error") && !j["error"].is_null()) {
    chunk.kind = StreamChunk::Kind::kError;
    chunk.error = error_text(j["error"]);
    return chunk;
  }
  if (const auto usage = j.find("usage"); usage != j.end() && usage->is_object()) {
    chunk.has_usage = true;
    chunk.prompt_tokens = usage->value("prompt_tokens", 0);
    chunk.completion_tokens = usage->value("completion_tokens", 0);
  }
  const auto choices = j.find("choices");
  if (choices == j.end() || !choices->is_array() || choices->empty()) return chunk;
  const nlohmann::json& choice = (*choices)[0];
  if (!choice.is_object()) return chunk;
  const nlohmann::json* text = nullptr;
  if (const auto t = choice.find("text"); t != choice.end()) {
    text = &*t;
  } else if (const auto delta = choice.find("delta"); delta != choice.end() && delta->is_object()) {
    if (const auto c = delta->find("content"); c != delta->end()) text = &*c;
  }
  if (text && text->is_string() && !text->get_ref<const std::string&>().empty()) {
    chunk.kind = StreamChunk::Kind::kContent;
    chunk.text = text->get<std::string>();
  }
  return chunk;
}

}  // namespace rapide::loadgen
