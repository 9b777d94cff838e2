// Errors: one exception type with a category, thrown at module boundaries.
//
// Why exceptions and not Status: loaders and parsers fail deep inside nested readers,
// and every failure must carry a precise message up to the user ("tensor 'blk.3.attn_q.weight':
// data range [..] exceeds file size ..."). A category lets front ends map errors to
// exit codes and HTTP statuses without parsing messages.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace rapide {

enum class ErrorCode {
  kInvalidArgument,    // the caller asked for something malformed (bad flag, bad JSON value)
  kNotFound,           // a file, tensor, token or model that does not exist
  kCorrupt,            // input data violates its format (truncated file, bad offsets)
  kUnsupported,        // valid input that rapide does not handle (yet)
  kOutOfRange,         // a well-formed value past a limit (prompt longer than the context)
  kResourceExhausted,  // temporarily full: memory, queue (retrying later may succeed)
  kExceedsCapacity,    // larger than the whole budget can ever hold (retrying never helps)
  kCancelled,          // aborted by the caller
  kUnavailable,        // temporarily unable (draining, loading)
  kInternal,           // a bug in rapide
};

const char* error_code_name(ErrorCode code);

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ErrorCode code() const { return code_; }

 private:
  ErrorCode code_;
};

// fail(ErrorCode::kCorrupt, "bad magic {:#x}", magic) throws Error with a formatted message.
template <typename... Args>
[[noreturn]] void fail(ErrorCode code, fmt::format_string<Args...> format, Args&&... args) {
  throw Error(code, fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace rapide
