#include "loadgen/http_client.h"

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "loadgen/openai_chunk.h"
#include "loadgen/sse_parser.h"

namespace rapide::loadgen {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

// Enough of an error body to say what the server objected to.
constexpr size_t kMaxKeptBody = 4096;
// Everything Beast parses out of the read buffer (the head, chunk headers, the trailer) must
// fit in it: this bounds a trailer, and keeps any field below 64 KiB, where Beast's field
// store throws std::length_error instead of failing the read (see serve/http_server.cpp).
constexpr size_t kReadBufferLimit = 63 * 1024;

std::string server_message(const std::string& body) {
  const nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_object() && j.contains("error")) {
    const nlohmann::json& e = j["error"];
    if (e.is_object() && e.contains("message") && e["message"].is_string()) {
      return e["message"].get<std::string>();
    }
    if (e.is_string()) return e.get<std::string>();
  }
  return body.substr(0, 200);
}

class StreamingRequest : public std::enable_shared_from_this<StreamingRequest> {
 public:
  StreamingRequest(asio::io_context& io, const HttpTarget& target, HttpPost post, TimePoint start,
                   RequestRecord record, RecordHandler done)
      : resolver_(io),
        stream_(io),
        target_(target),
        post_(std::move(post)),
        start_(start),
        record_(std::move(record)),
        done_(std::move(done)),
        buffer_(kReadBufferLimit) {}

  void run() {
    stream_.expires_after(post_.timeout);
    resolver_.async_resolve(
        target_.host, target_.port,
        [self = shared_from_this()](beast::error_code ec, tcp::resolver::results_type results) {
          self->on_resolve(ec, results);
        });
  }

 private:
  double now() const { return seconds_between(start_, Clock::now()); }

  void on_resolve(beast::error_code ec, const tcp::resolver::results_type& results) {
    if (ec) return fail(ErrorKind::kConnect, "resolve " + target_.host + ": " + ec.message());
    stream_.async_connect(results,
                          [self = shared_from_this()](beast::error_code ec, const tcp::endpoint&) {
                            self->on_connect(ec);
                          });
  }

  void on_connect(beast::error_code ec) {
    if (ec == beast::error::timeout) return fail(ErrorKind::kTimeout, "connect timed out");
    if (ec) {
      return fail(ErrorKind::kConnect,
                  "connect " + target_.host + ":" + target_.port + ": " + ec.message());
    }
    request_.method(http::verb::post);
    request_.target(target_.prefix + post_.path);
    request_.version(11);
    request_.set(http::field::host, target_.host + ":" + target_.port);
    request_.set(http::field::user_agent, "rapide-bench");
    request_.set(http::field::content_type, "application/json");
    request_.set(http::field::accept, "text/event-stream");
    if (!post_.api_key.empty()) request_.set(http::field::authorization, "Bearer " + post_.api_key);
    // One connection per request: its connect time is part of TTFT, as for a fresh client.
    request_.keep_alive(false);
    request_.body() = std::move(post_.body);
    request_.prepare_payload();
    http::async_write(stream_, request_, [self = shared_from_this()](beast::error_code ec, size_t) {
      self->on_write(ec);
    });
  }

  void on_write(beast::error_code ec) {
    if (ec) return fail_io(ec, "sending the request");
    // A stream is as long as the generation. (Not boost::none: Boost 1.74 compares a
    // Content-Length against an empty optional as "over the limit".)
    parser_.body_limit(std::numeric_limits<std::uint64_t>::max());
    http::async_read_header(
        stream_, buffer_, parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->on_header(ec); });
  }

  void on_header(beast::error_code ec) {
    if (ec) return fail_io(ec, "reading the response header");
    record_.http_status = static_cast<int>(parser_.get().result_int());
    read_body();
  }

  void read_body() {
    parser_.get().body().data = chunk_;
    parser_.get().body().size = sizeof(chunk_);
    http::async_read_some(
        stream_, buffer_, parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->on_body(ec); });
  }

  void on_body(beast::error_code ec) {
    if (ec == http::error::need_buffer) ec = {};
    const size_t got = sizeof(chunk_) - parser_.get().body().size;
    if (got > 0) consume(std::string_view(chunk_, got));
    if (finished_) return;
    if (ec) {
      // The server closing the connection after [DONE] (or ending an unframed body at EOF)
      // is the normal end of a stream.
      if (saw_done_ || ec == http::error::end_of_stream) return complete();
      return fail_io(ec, "reading the stream");
    }
    if (parser_.is_done()) return complete();
    read_body();
  }

  void consume(std::string_view bytes) {
    if (kept_body_.size() < kMaxKeptBody) {
      kept_body_.append(bytes.substr(0, kMaxKeptBody - kept_body_.size()));
    }
    if (record_.http_status != 200) return;
    sse_.feed(bytes, [this](const std::string& data) { on_event(data); });
    if (sse_.overflowed()) {
      fail(ErrorKind::kMalformed,
           fmt::format("an SSE line or event longer than {} bytes", SseParser::kMaxEventBytes));
    }
  }

  void on_event(const std::string& data) {
    if (finished_ || saw_done_) return;
    const StreamChunk chunk = parse_stream_chunk(data);
    switch (chunk.kind) {
      case StreamChunk::Kind::kDone:
        saw_done_ = true;
        done_time_ = now();
        return;
      case StreamChunk::Kind::kError:
        return fail(ErrorKind::kServerError, chunk.error);
      case StreamChunk::Kind::kMalformed:
        return fail(ErrorKind::kMalformed, chunk.error);
      case StreamChunk::Kind::kContent:
        record_.token_times.push_back(now());
        record_.output_text += chunk.text;
        if (post_.on_text) post_.on_text(chunk.text);
        break;
      case StreamChunk::Kind::kOther:
        break;
    }
    if (chunk.has_usage) {
      record_.usage_reported = true;
      record_.prompt_tokens = chunk.prompt_tokens;
      record_.output_tokens = chunk.completion_tokens;
    }
  }

  void complete() {
    if (finished_) return;
    if (record_.http_status == 200) {
      sse_.finish([this](const std::string& data) { on_event(data); });
      if (finished_) return;
    }
    if (record_.http_status != 200) {
      return fail(ErrorKind::kHttpStatus, "HTTP " + std::to_string(record_.http_status) + ": " +
                                              server_message(kept_body_));
    }
    if (!sse_.saw_data()) {
      const std::string type(parser_.get()[http::field::content_type]);
      return fail(ErrorKind::kNotStreaming,
                  "not an event stream (Content-Type: " + type + "): " + kept_body_.substr(0, 200));
    }
    if (record_.token_times.empty()) {
      return fail(ErrorKind::kEmpty, "the stream ended without generated text");
    }
    if (!record_.usage_reported) {
      record_.output_tokens = static_cast<int>(record_.token_times.size());
    }
    finish(saw_done_ ? done_time_ : now());
  }

  void fail_io(beast::error_code ec, const std::string& what) {
    if (ec == beast::error::timeout) return fail(ErrorKind::kTimeout, what + ": timed out");
    fail(ErrorKind::kIo, what + ": " + ec.message());
  }

  void fail(ErrorKind kind, const std::string& message) {
    if (finished_) return;
    record_.error = kind;
    record_.error_message = message;
    finish(now());
  }

  void finish(double end) {
    finished_ = true;
    record_.end_time = end;
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.close();
    done_(std::move(record_));
  }

  tcp::resolver resolver_;
  beast::tcp_stream stream_;
  HttpTarget target_;
  HttpPost post_;
  TimePoint start_;
  RequestRecord record_;
  RecordHandler done_;
  http::request<http::string_body> request_;
  http::response_parser<http::buffer_body> parser_;
  beast::flat_buffer buffer_;
  char chunk_[16384];
  SseParser sse_;
  std::string kept_body_;
  bool saw_done_ = false;
  double done_time_ = 0;
  bool finished_ = false;
};

}  // namespace

HttpTarget parse_url(const std::string& url) {
  const std::string scheme = "http://";
  if (url.rfind(scheme, 0) != 0) {
    fail(ErrorCode::kInvalidArgument, "--url must start with http:// (got '{}')", url);
  }
  HttpTarget target;
  std::string rest = url.substr(scheme.size());
  const size_t slash = rest.find('/');
  if (slash != std::string::npos) {
    target.prefix = rest.substr(slash);
    rest = rest.substr(0, slash);
    while (!target.prefix.empty() && target.prefix.back() == '/') target.prefix.pop_back();
  }
  const size_t colon = rest.rfind(':');
  if (colon != std::string::npos && rest.find(']', colon) == std::string::npos) {
    target.port = rest.substr(colon + 1);
    rest = rest.substr(0, colon);
  }
  if (!rest.empty() && rest.front() == '[' && rest.back() == ']')
    rest = rest.substr(1, rest.size() - 2);
  if (rest.empty() || target.port.empty())
    fail(ErrorCode::kInvalidArgument, "--url '{}': no host", url);
  target.host = rest;
  return target;
}

void post_streaming(asio::io_context& io, const HttpTarget& target, HttpPost post, TimePoint start,
                    RequestRecord record, RecordHandler done) {
  std::make_shared<StreamingRequest>(io, target, std::move(post), start, std::move(record),
                                     std::move(done))
      ->run();
}

std::optional<HttpReply> http_get(const HttpTarget& target, const std::string& path,
                                  const std::string& api_key, std::chrono::milliseconds timeout) {
  asio::io_context io;
  tcp::resolver resolver(io);
  beast::tcp_stream stream(io);
  http::request<http::empty_body> request{http::verb::get, target.prefix + path, 11};
  request.set(http::field::host, target.host + ":" + target.port);
  request.set(http::field::user_agent, "rapide-bench");
  if (!api_key.empty()) request.set(http::field::authorization, "Bearer " + api_key);
  request.keep_alive(false);
  beast::flat_buffer buffer(kReadBufferLimit);
  http::response<http::string_body> response;
  std::optional<HttpReply> reply;
  stream.expires_after(timeout);
  resolver.async_resolve(target.host, target.port, [&](beast::error_code ec, auto results) {
    if (ec) return;
    stream.async_connect(results, [&](beast::error_code ec, const tcp::endpoint&) {
      if (ec) return;
      http::async_write(stream, request, [&](beast::error_code ec, size_t) {
        if (ec) return;
        http::async_read(stream, buffer, response, [&](beast::error_code ec, size_t) {
          if (ec) return;
          reply = HttpReply{static_cast<int>(response.result_int()), response.body()};
        });
      });
    });
  });
  io.run_for(timeout + std::chrono::milliseconds(100));
  return reply;
}

}  // namespace rapide::loadgen
