// Anthropic's Messages API (POST /v1/messages) as a dialect of chat completions: a request is
// translated into the OpenAI chat body that rapide already runs (so sampling, the chat
// template, tool calling and its grammar are the chat endpoint's own), and the chat
// endpoint's response, stream chunks and errors are translated back into Anthropic's shapes.
//
// Request fields read (anything else is ignored, as the chat parser ignores unknown fields):
//   model, max_tokens (required), system (a string or a list of text blocks), messages
//   (role user|assistant; content a string or a list of blocks: text, tool_use in assistant
//   turns, tool_result in user turns), temperature, top_p, top_k, stop_sequences, stream,
//   tools ([{name, description, input_schema}]), tool_choice ({type: auto|any|tool|none,
//   name, disable_parallel_tool_use}).
// Other content blocks (image, document, thinking ...) and server tools are a 400.
//
// Differences from Anthropic's service (docs/anthropic-api.md): cache_* usage fields are
// absent; tool inputs stream as one delta per call. A stop sequence that matched comes back
// as stop_reason "stop_sequence" with its string, read from the chat choice's "stop_reason".
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace rapide::api {

// The OpenAI chat completions body equivalent to Anthropic request `body`. With
// `count_only` (/v1/messages/count_tokens) max_tokens is not required. Throws ApiError(400)
// naming the Anthropic field.
nlohmann::json chat_body_from_anthropic(const nlohmann::json& body, bool count_only = false);

// A non-streamed chat.completion body -> Anthropic's message object.
nlohmann::json anthropic_message(const nlohmann::json& chat_completion);

// An OpenAI error body ({"error": {"message", ...}}) or any other text -> Anthropic's
// {"type": "error", "error": {"type", "message"}} with the error type of `status`.
nlohmann::json anthropic_error(int status, const std::string& openai_body);
// "invalid_request_error", "authentication_error", "not_found_error", "api_error" ...
const char* anthropic_error_type(int status);

// A chat completions stream (its chunks with include_usage, then [DONE]) -> Anthropic's
// events: message_start, ping, content_block_start / _delta / _stop per block (text, then
// each tool_use with its input as one input_json_delta), message_delta (stop_reason,
// usage), message_stop; an error chunk becomes an `error` event.
class AnthropicStream {
 public:
  // `input_tokens`: the prompt's tokens, for message_start's usage.
  explicit AnthropicStream(int64_t input_tokens) : input_tokens_(input_tokens) {}
  // One SSE frame of the chat stream ("data: {...}\n\n" or "data: [DONE]\n\n") -> the
  // Anthropic frames it stands for ("event: ...\ndata: {...}\n\n" ...), maybe none.
  std::string translate(const std::string& frame);

 private:
  std::string chunk(const nlohmann::json& chunk);
  std::string open_text();
  std::string close_block();
  std::string finish();

  int64_t input_tokens_;
  int64_t output_tokens_ = 0;
  std::string stop_reason_ = "end_turn";
  nlohmann::json stop_sequence_;  // the stop string that matched, or null
  int blocks_ = 0;                // content blocks opened so far
  bool block_open_ = false;       // a text block is open
  bool started_ = false;          // message_start sent
  bool finished_ = false;         // message_stop (or an error) sent
};

}  // namespace rapide::api
