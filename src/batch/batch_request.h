// One line of an OpenAI Batch API input file -> a request ready for the engine, or the
// reason it cannot run.
//
// A line is {"custom_id": "...", "method": "POST", "url": "/v1/completions" or
// "/v1/chat/completions", "body": {...}}. The body goes through the parsers, front-end
// checks and admission checks `rapide serve` uses (src/api), so a line is refused exactly
// when the server would refuse the same body, with the same status, code and param.
// custom_ids must be unique; that is checked for the whole input before anything runs
// (resume_plan.h), so a parser sees each custom_id once.
//
// Every line carries its digest, FNV-1a 64 of the line's bytes (as JsonlReader returns it,
// without the line ending), which its record names (record_journal.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>

#include <nlohmann/json.hpp>

#include "api/api_error.h"
#include "api/chat.h"
#include "api/openai_protocol.h"
#include "engine/engine.h"

namespace rapide::batch {

// custom_id of a parsed input line: a non-empty string, or nothing (then the line is an
// "invalid_custom_id" error).
std::optional<std::string> custom_id_of(const nlohmann::json& entry);

struct BatchRequest {
  uint64_t line = 0;
  uint64_t digest = 0;
  std::string custom_id;
  api::GenerationSpec spec;  // prompts tokenized (chat rendered), seed chosen
};

// Why a line cannot run: what its record in the errors file says.
struct LineError {
  uint64_t line = 0;
  uint64_t digest = 0;
  std::optional<std::string> custom_id;  // absent when the line has no usable one
  std::string code;                      // e.g. "invalid_json", "invalid_method"
  std::string message;
  std::string param;
  // The server's answer to the same body (status + error JSON) when the body itself was
  // refused; absent for problems of the line's envelope.
  std::optional<int> status;
  nlohmann::json body;
};

// The error of a request (its line, digest and custom_id) refused with `error`.
LineError line_error(const BatchRequest& request, const api::ApiError& error);

class RequestParser {
 public:
  // `engine` gives the tokenizer, the context and the KV budget; `model_id` is the name a
  // body's "model" must match (empty or equal), as `rapide serve` requires.
  RequestParser(const Engine& engine, const api::ChatPrompter& chat, std::string model_id);

  std::variant<BatchRequest, LineError> parse(const std::string& text, uint64_t line);

 private:
  const Engine& engine_;
  const api::ChatPrompter& chat_;
  std::string model_id_;
};

}  // namespace rapide::batch
