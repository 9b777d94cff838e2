// Errors as the OpenAI API reports them: an HTTP status plus
// {"error": {"message", "type", "param", "code"}}.
//
// Handlers throw ApiError for problems they detect themselves (a missing field, an unknown
// model); rapide::Error from lower layers is mapped by its code, so the engine's and the
// sampler's messages (which name the offending parameter) reach the client unchanged.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>

#include "base/error.h"

namespace rapide::api {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string message, std::string param = {}, std::string code = {});

  int status() const { return status_; }
  const std::string& param() const { return param_; }
  const std::string& code() const { return code_; }
  // OpenAI's error "type" for the status, e.g. "invalid_request_error".
  const char* type() const;
  // Seconds a client should wait before retrying (429 / 503), if any.
  std::optional<int> retry_after() const { return retry_after_; }
  ApiError& with_retry_after(int seconds) {
    retry_after_ = seconds;
    return *this;
  }

  // The methods a 405 names in its Allow header.
  const std::string& allow() const { return allow_; }
  ApiError& with_allow(std::string methods) {
    allow_ = std::move(methods);
    return *this;
  }

  std::string to_json() const;

 private:
  int status_;
  std::string param_;
  std::string code_;
  std::optional<int> retry_after_;
  std::string allow_;
};

// Maps a rapide::Error: kInvalidArgument / kOutOfRange -> 400, kNotFound -> 404,
// kExceedsCapacity -> 400 (kv_budget_exceeded), kResourceExhausted -> 429, kUnavailable ->
// 503 (both with Retry-After), kUnsupported ->
// 400, the rest -> 500. `param` names the request field the error is about when the
// message does not start with one.
ApiError api_error_from(const Error& error, const std::string& param = {});

// A choice that failed inside the engine after it was accepted: the whole request answers
// 500 engine_error (a batch reports the same error for the line); with kUnavailable (the
// server's state, e.g. a prefill rank that did not answer) 503 unavailable with Retry-After;
// with kExceedsCapacity (the request asked for more work than a limit allows, e.g. a grammar
// over its per-token limit) 400 exceeds_limit: the same request would fail again; with
// kUnsupported (the request asked for what the model cannot do, e.g. a grammar its vocabulary
// cannot spell) 400 unsupported.
ApiError generation_failed(const std::string& engine_error, ErrorCode code = ErrorCode::kInternal);

}  // namespace rapide::api
