#include "loadgen/request_record.h"

#include <array>
#include <utility>

namespace rapide::loadgen {

namespace {

constexpr std::array<std::pair<ErrorKind, const char*>, 10> kNames = {{
    {ErrorKind::kNone, "none"},
    {ErrorKind::kConnect, "connect"},
    {ErrorKind::kHttpStatus, "http_status"},
    {ErrorKind::kNotStreaming, "not_streaming"},
    {ErrorKind::kMalformed, "malformed"},
    {ErrorKind::kServerError, "server_error"},
    {ErrorKind::kTimeout, "timeout"},
    {ErrorKind::kIo, "io"},
    {ErrorKind::kEmpty, "empty"},
    {ErrorKind::kRejected, "rejected"},
}};

}  // namespace

const char* error_kind_name(ErrorKind kind) {
  for (const auto& [k, name] : kNames) {
    if (k == kind) return name;
  }
  return "unknown";
}

ErrorKind parse_error_kind(const std::string& name) {
  for (const auto& [k, n] : kNames) {
    if (name == n) return k;
  }
  return ErrorKind::kServerError;
}

double RequestRecord::tpot() const {
  if (token_times.empty() || output_tokens < 2) return -1.0;
  return (end_time - token_times.front()) / (output_tokens - 1);
}

std::vector<double> RequestRecord::inter_token_latencies() const {
  std::vector<double> gaps;
  for (size_t i = 1; i < token_times.size(); ++i) {
    gaps.push_back(token_times[i] - token_times[i - 1]);
  }
  return gaps;
}

}  // namespace rapide::loadgen
