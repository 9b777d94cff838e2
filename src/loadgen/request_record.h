// What one benchmark request measured: the raw timestamps every metric is derived from.
//
// Times are seconds relative to the moment the request was sent, so a record can be written
// to JSON, read back and summarized again without losing anything.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace rapide::loadgen {

enum class ErrorKind {
  kNone,
  kConnect,       // could not resolve or connect (refused, unreachable)
  kHttpStatus,    // the server answered with a non-200 status
  kNotStreaming,  // 200 but not text/event-stream (the server ignored "stream": true)
  kMalformed,     // the stream broke the SSE / OpenAI chunk format
  kServerError,   // an error object inside the stream, or the engine ended with an error
  kTimeout,       // no completion within the per-request timeout
  kIo,            // the connection broke mid-response
  kEmpty,         // the stream ended without any generated token
  kRejected,      // the in-process engine refused the request at submit
};

const char* error_kind_name(ErrorKind kind);
// Inverse of error_kind_name; unknown names give kServerError so old files still load.
ErrorKind parse_error_kind(const std::string& name);

struct RequestRecord {
  uint64_t index = 0;               // position in the workload
  int64_t conversation = 0;         // which conversation (workload item) it belongs to
  int turn = 0;                     // turn within the conversation
  double send_time = 0.0;           // seconds since the run started
  std::vector<double> token_times;  // arrival of each content chunk, seconds since send
  double end_time = 0.0;            // response complete (or failed), seconds since send
  int prompt_tokens = 0;
  int output_tokens = 0;
  int expected_output_tokens = 0;  // what the workload asked for
  bool usage_reported = false;     // counts came from the server's usage, not counted chunks
  ErrorKind error = ErrorKind::kNone;
  int http_status = 0;
  std::string error_message;
  std::string output_text;  // kept in memory for multi-turn history; not written to JSON

  bool ok() const { return error == ErrorKind::kNone; }
  // Time to first token; negative when no token arrived.
  double ttft() const { return token_times.empty() ? -1.0 : token_times.front(); }
  // (end - first token) / (output tokens - 1); negative with fewer than two tokens.
  double tpot() const;
  double e2e() const { return end_time; }
  // Gaps between consecutive content chunks.
  std::vector<double> inter_token_latencies() const;
};

// Receives a finished record (on the runner's io_context thread).
using RecordHandler = std::function<void(RequestRecord&& record)>;

}  // namespace rapide::loadgen
