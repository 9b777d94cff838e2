#include "serve/tokenize_endpoints.h"

#include "api/api_error.h"
#include "api/openai_protocol.h"
#include "base/error.h"

namespace rapide::serve {

using nlohmann::json;

namespace {

bool bool_field(const json& body, const char* name, bool fallback) {
  if (!body.contains(name) || body[name].is_null()) return fallback;
  if (!body[name].is_boolean()) {
    throw api::ApiError(400, fmt::format("'{}' must be true or false", name), name, "invalid_type");
  }
  return body[name].get<bool>();
}

}  // namespace

json tokenize_response(const json& body, const Tokenizer& tokenizer, const api::ChatPrompter& chat,
                       int max_model_len) {
  if (!body.is_object())
    throw api::ApiError(400, "the body must be a JSON object", {}, "invalid_type");
  std::vector<int32_t> ids;
  if (body.contains("messages")) {
    const api::GenerationSpec spec = api::parse_chat_request(body, tokenizer);
    ids = chat.prompt_tokens(spec.messages, spec.tools);
  } else {
    // llama.cpp names the text "content" and adds no BOS by default; vLLM says "prompt" and
    // adds it: each default follows the field its client sends.
    const bool llama_cpp = body.contains("content");
    const char* field = llama_cpp ? "content" : "prompt";
    if (!body.contains(field) || !body[field].is_string()) {
      throw api::ApiError(400, "give the text as 'content' (or 'prompt'), or 'messages'", field,
                          "invalid_value");
    }
    const bool add_special =
        bool_field(body, "add_special_tokens", bool_field(body, "add_special", !llama_cpp));
    const bool parse_special = bool_field(body, "parse_special", true);
    try {
      ids = tokenizer.encode(body[field].get<std::string>(), add_special, parse_special);
    } catch (const Error& e) {
      throw api::api_error_from(e, field);
    }
  }
  json tokens = json::array();
  const bool with_pieces = bool_field(body, "with_pieces", false);
  for (const int32_t id : ids) {
    if (with_pieces) {
      tokens.push_back({{"id", id}, {"piece", tokenizer.token_to_piece(id, true)}});
    } else {
      tokens.push_back(id);
    }
  }
  json out = {
      {"tokens", std::move(tokens)}, {"count", ids.size()}, {"max_model_len", max_model_len}};
  if (bool_field(body, "return_token_strs", false)) {
    json strs = json::array();
    for (const int32_t id : ids) strs.push_back(tokenizer.token_to_piece(id, true));
    out["token_strs"] = std::move(strs);
  }
  return out;
}

json detokenize_response(const json& body, const Tokenizer& tokenizer) {
  if (!body.is_object() || !body.contains("tokens") || !body["tokens"].is_array()) {
    throw api::ApiError(400, "'tokens' must be a list of token ids", "tokens", "invalid_value");
  }
  std::vector<int32_t> ids;
  for (const json& t : body["tokens"]) {
    if (!t.is_number_integer()) {
      throw api::ApiError(400, "'tokens' must be a list of token ids", "tokens", "invalid_type");
    }
    const int64_t id = t.get<int64_t>();
    if (id < 0 || id >= tokenizer.vocab_size()) {
      throw api::ApiError(400,
                          fmt::format("token id {} is outside the vocabulary (0..{})", id,
                                      tokenizer.vocab_size() - 1),
                          "tokens", "invalid_value");
    }
    ids.push_back(static_cast<int32_t>(id));
  }
  const std::string text = tokenizer.decode(ids);
  return {{"content", text}, {"prompt", text}};
}

}  // namespace rapide::serve
