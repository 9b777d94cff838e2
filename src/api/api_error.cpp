#include "api/api_error.h"

#include <cctype>
#include <nlohmann/json.hpp>

namespace rapide::api {

namespace {

// validate() messages start with the parameter they are about ("top_p must be in ...");
// returning it fills the error's "param" the way OpenAI does.
std::string leading_identifier(const std::string& message) {
  size_t end = 0;
  while (end < message.size() &&
         (std::islower(static_cast<unsigned char>(message[end])) || message[end] == '_')) {
    ++end;
  }
  if (end == 0 || end >= message.size()) return {};
  const std::string word = message.substr(0, end);
  // An element of a list field ("stop[3] must be ...") names the field.
  if (message[end] == '[') {
    size_t close = end + 1;
    while (close < message.size() && std::isdigit(static_cast<unsigned char>(message[close]))) {
      ++close;
    }
    if (close == end + 1 || close + 1 >= message.size() || message[close] != ']' ||
        message[close + 1] != ' ') {
      return {};
    }
    return word;
  }
  if (message[end] != ' ') return {};
  // Ordinary leading words of engine messages are not parameters.
  if (word == "the" || word == "a" || word == "an") return {};
  return word;
}

}  // namespace

ApiError::ApiError(int status, std::string message, std::string param, std::string code)
    : std::runtime_error(std::move(message)),
      status_(status),
      param_(std::move(param)),
      code_(std::move(code)) {}

const char* ApiError::type() const {
  switch (status_) {
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 429:
      return "rate_limit_error";
    case 503:
      return "service_unavailable_error";
    default:
      return status_ >= 500 ? "server_error" : "invalid_request_error";
  }
}

std::string ApiError::to_json() const {
  nlohmann::json error = {{"message", what()},
                          {"type", type()},
                          {"param", param_.empty() ? nlohmann::json() : nlohmann::json(param_)},
                          {"code", code_.empty() ? nlohmann::json() : nlohmann::json(code_)}};
  return nlohmann::json{{"error", error}}.dump(-1, ' ', false,
                                               nlohmann::json::error_handler_t::replace);
}

ApiError api_error_from(const Error& error, const std::string& param) {
  const std::string message = error.what();
  std::string p = leading_identifier(message);
  if (p.empty()) p = param;
  switch (error.code()) {
    case ErrorCode::kInvalidArgument:
      return ApiError(400, message, p, "invalid_value");
    case ErrorCode::kOutOfRange:
      return ApiError(400, message, p, "context_length_exceeded");
    case ErrorCode::kUnsupported:
      return ApiError(400, message, p, "unsupported");
    case ErrorCode::kNotFound:
      return ApiError(404, message, p, "not_found");
    case ErrorCode::kExceedsCapacity:
      return ApiError(400, message, "max_tokens", "kv_budget_exceeded");
    case ErrorCode::kResourceExhausted:
      return ApiError(429, message, {}, "queue_full").with_retry_after(1);
    case ErrorCode::kUnavailable:
      return ApiError(503, message, {}, "unavailable").with_retry_after(5);
    case ErrorCode::kCancelled:
      return ApiError(499, message, {}, "cancelled");
    default:
      return ApiError(500, message, {}, "internal_error");
  }
}

ApiError generation_failed(const std::string& engine_error, ErrorCode code) {
  if (code == ErrorCode::kUnavailable) {
    return ApiError(503, "generation failed: " + engine_error, {}, "unavailable")
        .with_retry_after(5);
  }
  if (code == ErrorCode::kExceedsCapacity) {
    return ApiError(400, "generation failed: " + engine_error, {}, "exceeds_limit");
  }
  if (code == ErrorCode::kUnsupported) {
    return ApiError(400, "generation failed: " + engine_error, {}, "unsupported");
  }
  return ApiError(500, "generation failed: " + engine_error, {}, "engine_error");
}

}  // namespace rapide::api
