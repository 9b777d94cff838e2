#include "serve/request_log.h"

#include <nlohmann/json.hpp>

namespace rapide::serve {

namespace {

// The "message" of an OpenAI-shaped error body, or the body itself when it is not one.
std::string error_message(const std::string& body) {
  const nlohmann::json parsed = nlohmann::json::parse(body, nullptr, false);
  if (parsed.is_object() && parsed.contains("error") && parsed["error"].is_object() &&
      parsed["error"].value("message", nlohmann::json()).is_string()) {
    return parsed["error"]["message"].get<std::string>();
  }
  return body.substr(0, 200);
}

}  // namespace

std::string format_request_line(const RequestRecord& r, double e2e_seconds, LogFormat format) {
  nlohmann::ordered_json fields;
  fields["event"] = "request";
  fields["request_id"] = r.id;
  fields["client"] = r.client;
  fields["method"] = r.method;
  fields["route"] = r.path;
  fields["status"] = r.status;
  if (r.prompt_tokens >= 0) fields["prompt_tokens"] = r.prompt_tokens;
  if (r.completion_tokens >= 0) fields["completion_tokens"] = r.completion_tokens;
  if (r.ttft >= 0) fields["ttft_s"] = r.ttft;
  if (r.tpot >= 0) fields["tpot_s"] = r.tpot;
  fields["e2e_s"] = e2e_seconds;
  if (r.kv_bytes >= 0) {
    fields["kv_bytes"] = r.kv_bytes;
    fields["kv_transfer_s"] = r.kv_transfer;
    fields["kv_wait_s"] = r.kv_wait;
  }
  if (!r.finish_reason.empty()) fields["finish_reason"] = r.finish_reason;
  if (!r.error.empty()) fields["error"] = r.error;
  if (!r.prompt.empty()) fields["prompt"] = r.prompt;
  if (format == LogFormat::kJson) {
    return fields.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  std::string line =
      fmt::format("request {} {} {} {} {}", r.id, r.client, r.method, r.path, r.status);
  if (r.prompt_tokens >= 0) line += fmt::format(" prompt_tokens={}", r.prompt_tokens);
  if (r.completion_tokens >= 0) line += fmt::format(" completion_tokens={}", r.completion_tokens);
  if (r.ttft >= 0) line += fmt::format(" ttft={:.4f}s", r.ttft);
  if (r.tpot >= 0) line += fmt::format(" tpot={:.4f}s", r.tpot);
  line += fmt::format(" e2e={:.4f}s", e2e_seconds);
  if (r.kv_bytes >= 0) {
    line += fmt::format(" kv_bytes={} kv_transfer={:.4f}s kv_wait={:.4f}s", r.kv_bytes,
                        r.kv_transfer, r.kv_wait);
  }
  if (!r.finish_reason.empty()) line += " finish=" + r.finish_reason;
  // Quoted as JSON strings, so a message or prompt cannot break the line apart.
  if (!r.error.empty()) line += " error=" + nlohmann::json(r.error).dump();
  if (!r.prompt.empty()) line += " prompt=" + nlohmann::json(r.prompt).dump();
  return line;
}

LoggedExchange::LoggedExchange(std::shared_ptr<HttpExchange> inner,
                               std::shared_ptr<RequestRecord> record)
    : inner_(std::move(inner)), record_(std::move(record)) {}

LoggedExchange::~LoggedExchange() {
  // Dropped without a complete response (e.g. a failure after the stream began).
  if (record_->status != 0) log_once();
}

void LoggedExchange::add_header(std::string name, std::string value) {
  inner_->add_header(std::move(name), std::move(value));
}

void LoggedExchange::respond(int status, const std::string& content_type, std::string body,
                             const HeaderList& headers) {
  record_->status = status;
  if (status >= 400) record_->error = error_message(body);
  log_once();
  inner_->respond(status, content_type, std::move(body), headers);
}

void LoggedExchange::start_stream(const std::string& content_type) {
  record_->status = 200;
  inner_->start_stream(content_type);
}

void LoggedExchange::end_stream() {
  log_once();
  inner_->end_stream();
}

void LoggedExchange::on_client_gone(std::function<void()> callback) {
  if (!callback) return inner_->on_client_gone(nullptr);
  // The callback holds the record, not this wrapper (which holds the callback's owner).
  inner_->on_client_gone([callback = std::move(callback), record = record_]() {
    callback();
    record->status = 499;  // nginx's "client closed request"
    record->error = "the client disconnected before the response was complete";
    log_request(*record);
  });
}

void LoggedExchange::log_once() {
  log_request(*record_);
}

void log_request(RequestRecord& record) {
  if (record.logged) return;
  record.logged = true;
  const std::string line =
      format_request_line(record, seconds_between(record.start, Clock::now()), log_format());
  if (record.quiet) {  // a probe's 503 while loading is its expected answer, too
    spdlog::debug("{}", line);
  } else {
    spdlog::info("{}", line);
  }
}

}  // namespace rapide::serve
