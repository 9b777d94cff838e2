// One log line per HTTP request, written when its response is complete (or the client left):
// when, which request, from whom, what, the status, and for generation requests the token
// counts, TTFT, TPOT, E2E and finish reason; a 4xx/5xx carries its error message.
//
//   [2026-12-01 06:30:38.123 I] request req-7 127.0.0.1:51234 POST /v1/completions 200
//       prompt_tokens=5 completion_tokens=16 ttft=0.012s tpot=0.004s e2e=0.071s finish=length
//
// (disaggregated serving adds kv_bytes=... kv_transfer=...s kv_wait=...s: the prompt's K/V
// received from the prefill rank, the time receiving them, the time the request waited)
//
// (one line; with --log-format json the same fields as members). The prompt text appears only
// with --log-prompts: prompts may hold personal data an operator must not collect.
//
// LoggedExchange wraps the connection's HttpExchange, so every way a response ends (a
// handler's answer, an error, a finished stream, a hang-up) passes through one place.
#pragma once

#include <memory>
#include <string>

#include "base/clock.h"
#include "base/logging.h"
#include "serve/http_exchange.h"

namespace rapide::serve {

// What the log line says about one request; the handlers fill the generation fields.
struct RequestRecord {
  std::string id;
  std::string client;
  std::string method;
  std::string path;
  TimePoint start;
  bool quiet = false;  // /health and /metrics: debug level, so probes do not flood the log
  int status = 0;
  std::string error;  // a 4xx/5xx's message
  // Generation requests only (-1: not one).
  int64_t prompt_tokens = -1;
  int64_t completion_tokens = -1;
  double ttft = -1;  // seconds to the first token of the first choice
  double tpot = -1;  // seconds per output token after the first
  std::string finish_reason;
  // Disaggregation (the prompt's K/V came from the prefill rank): bytes received, seconds
  // receiving them, seconds the request waited for them (-1: not disaggregated).
  int64_t kv_bytes = -1;
  double kv_transfer = -1;
  double kv_wait = -1;
  std::string prompt;  // only with --log-prompts
  bool logged = false;
};

// Logs the record's line once (later calls do nothing).
void log_request(RequestRecord& record);

// The line's text (without the logger's time and level prefix) in the given format.
std::string format_request_line(const RequestRecord& record, double e2e_seconds, LogFormat format);

class LoggedExchange final : public HttpExchange {
 public:
  LoggedExchange(std::shared_ptr<HttpExchange> inner, std::shared_ptr<RequestRecord> record);
  ~LoggedExchange() override;

  boost::asio::any_io_executor executor() override { return inner_->executor(); }
  std::string peer() const override { return inner_->peer(); }
  void add_header(std::string name, std::string value) override;
  void respond(int status, const std::string& content_type, std::string body,
               const HeaderList& headers = {}) override;
  void start_stream(const std::string& content_type) override;
  void stream(std::string data) override { inner_->stream(std::move(data)); }
  void end_stream() override;
  void on_client_gone(std::function<void()> callback) override;

  RequestRecord& record() { return *record_; }
  const std::shared_ptr<RequestRecord>& shared_record() const { return record_; }

 private:
  void log_once();

  std::shared_ptr<HttpExchange> inner_;
  std::shared_ptr<RequestRecord> record_;
};

}  // namespace rapide::serve
