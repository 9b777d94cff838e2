// Response bodies and stream chunks in OpenAI's shapes, for both endpoints.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/openai_protocol.h"
#include "sampling/sampler.h"
#include "tokenizer/tokenizer.h"

namespace rapide::api {

// A generated token's log-probability and its alternatives (raw model distribution).
struct LogprobEntry {
  int32_t token = -1;
  size_t text_offset = 0;  // where the token's text starts in the output (TokenEvent's)
  float logprob = 0.0f;
  std::vector<TokenLogprob> top;
};

// What every body of one request shares.
struct ResponseHeader {
  Endpoint endpoint = Endpoint::kCompletions;
  std::string id;  // "cmpl-..." or "chatcmpl-..."
  int64_t created = 0;
  std::string model;
};

ResponseHeader make_response_header(Endpoint endpoint, std::string model);

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;
  nlohmann::json compression;  // usage.compression when not null (GenerationSpec's)
  nlohmann::json kv_transfer;  // usage.kv_transfer when not null (disaggregation, usage_of)
};
nlohmann::json usage_json(const Usage& usage);

// Completions: {"tokens", "token_logprobs", "top_logprobs", "text_offset"}; the offsets are
// the engine's (LogprobEntry::text_offset: where each token's text starts in the output).
nlohmann::json completion_logprobs_json(const Tokenizer& tokenizer,
                                        std::span<const LogprobEntry> entries);
// Chat: {"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}]}.
nlohmann::json chat_logprobs_json(const Tokenizer& tokenizer,
                                  std::span<const LogprobEntry> entries);
// The endpoint's shape of the two above.
nlohmann::json logprobs_json(Endpoint endpoint, const Tokenizer& tokenizer,
                             std::span<const LogprobEntry> entries);

struct ChoiceResult {
  int index = 0;
  std::string text;
  const char* finish_reason = "stop";
  std::string stop_string;    // "stop_reason" (vLLM's field): the stop string that matched
  nlohmann::json logprobs;    // null when not requested
  nlohmann::json tool_calls;  // chat: OpenAI's tool_calls list, null when none
};

// The whole non-streamed response.
nlohmann::json full_response(const ResponseHeader& header, const std::vector<ChoiceResult>& choices,
                             const Usage& usage);

// One stream chunk for one choice. For chat, `first` adds the assistant role to the delta.
// finish_reason null while the choice runs. include_usage adds "usage": null, as OpenAI
// does on every chunk but the last. The chunk with a finish_reason also carries vLLM's
// "stop_reason": `stop_string`, or null when no stop string ended the choice.
nlohmann::json stream_chunk(const ResponseHeader& header, int index, const std::string& text,
                            const nlohmann::json& logprobs, const char* finish_reason, bool first,
                            bool include_usage, const std::string& stop_string = {});
// A chat stream chunk carrying whole tool calls as one delta (OpenAI's shape: each call
// with its index, id, type and function name + arguments).
nlohmann::json tool_calls_chunk(const ResponseHeader& header, int index,
                                const nlohmann::json& tool_calls, bool include_usage);
// The final usage chunk (empty choices) of a stream with include_usage.
nlohmann::json usage_chunk(const ResponseHeader& header, const Usage& usage);

// Serializes, replacing invalid UTF-8 (a byte token's piece) instead of throwing.
std::string dump_json(const nlohmann::json& value);

}  // namespace rapide::api
