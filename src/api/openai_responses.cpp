#include "api/openai_responses.h"

#include <fmt/format.h>

#include <chrono>
#include <random>

namespace rapide::api {

using nlohmann::json;

namespace {

// vLLM's "stop_reason" beside finish_reason: the stop string that ended the choice, or null
// (end of generation, a stop token, a length limit). OpenAI's clients ignore the field.
json stop_reason_json(const std::string& stop_string) {
  return stop_string.empty() ? json() : json(stop_string);
}

const char* object_name(Endpoint endpoint, bool chunk) {
  if (endpoint == Endpoint::kCompletions) return "text_completion";
  return chunk ? "chat.completion.chunk" : "chat.completion";
}

json envelope(const ResponseHeader& h, bool chunk) {
  return json{{"id", h.id},
              {"object", object_name(h.endpoint, chunk)},
              {"created", h.created},
              {"model", h.model},
              {"system_fingerprint", "rapide"}};
}

json byte_list(const std::string& piece) {
  json bytes = json::array();
  for (unsigned char c : piece) bytes.push_back(static_cast<int>(c));
  return bytes;
}

}  // namespace

ResponseHeader make_response_header(Endpoint endpoint, std::string model) {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  ResponseHeader h;
  h.endpoint = endpoint;
  h.id = fmt::format("{}-{:016x}{:08x}", endpoint == Endpoint::kChat ? "chatcmpl" : "cmpl", rng(),
                     static_cast<uint32_t>(rng()));
  h.created = std::chrono::duration_cast<std::chrono::seconds>(
                  std::chrono::system_clock::now().time_since_epoch())
                  .count();
  h.model = std::move(model);
  return h;
}

json usage_json(const Usage& u) {
  json usage{{"prompt_tokens", u.prompt_tokens},
             {"completion_tokens", u.completion_tokens},
             {"total_tokens", u.prompt_tokens + u.completion_tokens},
             {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
  if (!u.compression.is_null()) usage["compression"] = u.compression;
  if (!u.kv_transfer.is_null()) usage["kv_transfer"] = u.kv_transfer;
  return usage;
}

json completion_logprobs_json(const Tokenizer& tokenizer, std::span<const LogprobEntry> entries) {
  json tokens = json::array(), token_logprobs = json::array(), top = json::array(),
       offsets = json::array();
  for (const LogprobEntry& e : entries) {
    const std::string piece = tokenizer.token_to_piece(e.token);
    tokens.push_back(piece);
    token_logprobs.push_back(e.logprob);
    json alternatives = json::object();
    for (const TokenLogprob& t : e.top) {
      alternatives[tokenizer.token_to_piece(t.token)] = t.logprob;
    }
    top.push_back(e.top.empty() ? json() : alternatives);
    offsets.push_back(e.text_offset);
  }
  return json{{"tokens", tokens},
              {"token_logprobs", token_logprobs},
              {"top_logprobs", top},
              {"text_offset", offsets}};
}

json chat_logprobs_json(const Tokenizer& tokenizer, std::span<const LogprobEntry> entries) {
  json content = json::array();
  for (const LogprobEntry& e : entries) {
    const std::string piece = tokenizer.token_to_piece(e.token);
    json top = json::array();
    for (const TokenLogprob& t : e.top) {
      const std::string alt = tokenizer.token_to_piece(t.token);
      top.push_back({{"token", alt}, {"logprob", t.logprob}, {"bytes", byte_list(alt)}});
    }
    content.push_back({{"token", piece},
                       {"logprob", e.logprob},
                       {"bytes", byte_list(piece)},
                       {"top_logprobs", top}});
  }
  return json{{"content", content}};
}

json logprobs_json(Endpoint endpoint, const Tokenizer& tokenizer,
                   std::span<const LogprobEntry> entries) {
  return endpoint == Endpoint::kChat ? chat_logprobs_json(tokenizer, entries)
                                     : completion_logprobs_json(tokenizer, entries);
}

json full_response(const ResponseHeader& header, const std::vector<ChoiceResult>& choices,
                   const Usage& usage) {
  json body = envelope(header, false);
  json list = json::array();
  for (const ChoiceResult& c : choices) {
    json choice = {{"index", c.index},
                   {"logprobs", c.logprobs},
                   {"finish_reason", c.finish_reason},
                   {"stop_reason", stop_reason_json(c.stop_string)}};
    if (header.endpoint == Endpoint::kChat) {
      choice["message"] = {{"role", "assistant"}, {"content", c.text}};
      if (!c.tool_calls.is_null()) {
        // OpenAI answers content null beside tool calls when the model wrote no text.
        if (c.text.find_first_not_of(" \t\r\n") == std::string::npos) {
          choice["message"]["content"] = nullptr;
        }
        choice["message"]["tool_calls"] = c.tool_calls;
      }
    } else {
      choice["text"] = c.text;
    }
    list.push_back(std::move(choice));
  }
  body["choices"] = std::move(list);
  body["usage"] = usage_json(usage);
  return body;
}

json stream_chunk(const ResponseHeader& header, int index, const std::string& text,
                  const json& logprobs, const char* finish_reason, bool first, bool include_usage,
                  const std::string& stop_string) {
  json body = envelope(header, true);
  json choice = {{"index", index},
                 {"logprobs", logprobs},
                 {"finish_reason", finish_reason ? json(finish_reason) : json()}};
  if (finish_reason != nullptr) choice["stop_reason"] = stop_reason_json(stop_string);
  if (header.endpoint == Endpoint::kChat) {
    json delta = json::object();
    if (first) delta["role"] = "assistant";
    if (!text.empty() || first) delta["content"] = text;
    choice["delta"] = std::move(delta);
  } else {
    choice["text"] = text;
  }
  body["choices"] = json::array({std::move(choice)});
  if (include_usage) body["usage"] = nullptr;
  return body;
}

json tool_calls_chunk(const ResponseHeader& header, int index, const json& tool_calls,
                      bool include_usage) {
  json body = envelope(header, true);
  json deltas = json::array();
  for (size_t i = 0; i < tool_calls.size(); ++i) {
    json d = tool_calls[i];
    d["index"] = i;
    deltas.push_back(std::move(d));
  }
  body["choices"] = json::array({{{"index", index},
                                  {"logprobs", nullptr},
                                  {"finish_reason", nullptr},
                                  {"delta", {{"tool_calls", std::move(deltas)}}}}});
  if (include_usage) body["usage"] = nullptr;
  return body;
}

json usage_chunk(const ResponseHeader& header, const Usage& usage) {
  json body = envelope(header, true);
  body["choices"] = json::array();
  body["usage"] = usage_json(usage);
  return body;
}

std::string dump_json(const json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace rapide::api
