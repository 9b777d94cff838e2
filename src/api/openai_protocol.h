// JSON request bodies of /v1/completions and /v1/chat/completions -> what the engine runs.
//
// Parsing checks types and ranges of every field it reads and throws ApiError(400) naming
// the field, so a client learns which parameter is wrong. Fields OpenAI defines that rapide
// does not implement (best_of > 1, echo, suffix) are refused rather than silently ignored;
// unknown fields are ignored, as OpenAI's own server and vLLM do. Structured output fields
// (response_format, grammar, guided_*) are read by structured_output.h, tool calling's here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/tool_calls.h"
#include "engine/engine_options.h"
#include "sampling/sampling_params.h"
#include "tokenizer/tokenizer.h"

namespace rapide::api {

enum class Endpoint { kCompletions, kChat };

// One parsed request. Each prompt runs `n` times; choice index = prompt * n + i.
struct GenerationSpec {
  Endpoint endpoint = Endpoint::kCompletions;
  std::string model;                          // as the client wrote it ("" when absent)
  std::vector<std::vector<int32_t>> prompts;  // token ids (completions; chat fills one later)
  nlohmann::json messages;                    // chat only
  nlohmann::json tools;                       // chat only, handed to the template
  SamplingParams sampling;                    // seed already chosen
  // The field sampling.constraint came from (response_format, grammar, guided_regex,
  // guided_choice): the param of an error the engine finds in it.
  std::string constraint_param;
  bool seed_given = false;
  int n = 1;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  // Completions: `logprobs` is the number of alternatives (0..20), -1 when absent.
  // Chat: `logprobs` true plus `top_logprobs` alternatives.
  bool logprobs = false;
  int top_logprobs = 0;
  std::string user;
  // Chat tool calling: `tools` given and tool_choice not "none" -> the output is parsed into
  // tool_calls. "required" or a named function also constrains the output to calls
  // (ChatPrompter::fill_prompt builds that grammar once the format is known).
  bool parse_tool_calls = false;
  bool tool_call_required = false;
  std::string tool_choice_name;  // a named function
  bool parallel_tool_calls = true;
  ToolCallFormat tool_format = ToolCallFormat::kJson;  // the model's, from fill_prompt
  // The "speculative" extension: {"mode": "off"|"ngram"|"draft", "tokens": N|"auto"}, both
  // optional. Parsing checks its shape; whether the server can honour it is the engine's
  // check (Engine::check_speculation).
  SpecOverride speculative;
  // The "compression" extension's report for usage (serve/prompt_compression.h); null
  // when the request did not ask for compression.
  nlohmann::json compression_usage;
};

// The most guesses per step a request may name (the engine refuses more than it allows).
constexpr int kMaxSpecTokens = 64;

// The most choices one request may ask for: n x prompts sequences run at once.
constexpr int kMaxChoices = 128;

// The endpoint's name: "completions" or "chat.completions" (the server's metrics label).
const char* endpoint_name(Endpoint endpoint);

// The endpoint of a request path ("/v1/completions", "/v1/chat/completions"), the server's
// route or a batch line's "url"; nullopt for any other path.
std::optional<Endpoint> endpoint_for_path(std::string_view path);

// Parses a body for `endpoint` with one of the two parsers below.
GenerationSpec parse_request(const nlohmann::json& body, Endpoint endpoint,
                             const Tokenizer& tokenizer);
// Parses a completions body. Prompts may be a string, a list of strings, a list of token
// ids or a list of lists of token ids; text is tokenized with BOS (as the model asks).
GenerationSpec parse_completion_request(const nlohmann::json& body, const Tokenizer& tokenizer);
// Parses a chat body; messages are checked here and turned into a prompt by chat.h.
GenerationSpec parse_chat_request(const nlohmann::json& body, const Tokenizer& tokenizer);

// A JSON list of token ids in [0, vocab_size) (prompts, embeddings inputs, stop_token_ids);
// ApiError(400) naming `param` otherwise.
std::vector<int32_t> read_token_ids(const nlohmann::json& array, const char* param, int vocab_size);

// Parses a request body with parse_json_limited (json_limited.h); an empty body is a 400 too.
nlohmann::json parse_json_body(const std::string& body);

}  // namespace rapide::api
