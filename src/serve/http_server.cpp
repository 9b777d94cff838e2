#include "serve/http_server.h"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <optional>

#include "api/api_error.h"
#include "base/error.h"
#include "base/logging.h"
#include "serve/http_request_limits.h"

namespace rapide::serve {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

struct HttpServer::Shared {
  HttpServerOptions options;
  HttpHandler handler;
  ServeMetrics* metrics;
};

namespace {

// After refusing a body (413) the client may still be sending it; reading it away for a
// moment before closing lets the client see the response instead of a connection reset.
constexpr std::chrono::seconds kLingerTimeout{2};

class HttpSession final : public HttpExchange, public std::enable_shared_from_this<HttpSession> {
 public:
  HttpSession(tcp::socket&& socket, std::shared_ptr<const HttpServer::Shared> shared)
      : stream_(std::move(socket)), shared_(std::move(shared)), buffer_(kReadBufferLimit) {
    shared_->metrics->connection_opened();
  }
  ~HttpSession() override {
    uncount();
    shared_->metrics->connection_closed();
  }

  void run() {
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->read_request(); });
  }

  net::any_io_executor executor() override { return stream_.get_executor(); }

  void respond(int status, const std::string& content_type, std::string body,
               const HeaderList& headers) override {
    if (closed_) return;
    finish_exchange();
    auto res = std::make_shared<http::response<http::string_body>>(
        static_cast<http::status>(status), version_);
    res->set(http::field::server, "rapide");
    res->set(http::field::content_type, content_type);
    for (const auto& [name, value] : headers) res->set(name, value);
    res->keep_alive(keep_alive_);
    res->body() = std::move(body);
    res->prepare_payload();
    stream_.expires_after(shared_->options.write_timeout);
    http::async_write(stream_, *res,
                      [self = shared_from_this(), res](beast::error_code ec, size_t) {
                        self->after_response(ec, res->need_eof());
                      });
  }

  void start_stream(const std::string& content_type) override {
    if (closed_) return;
    auto res = std::make_shared<http::response<http::empty_body>>(http::status::ok, version_);
    res->set(http::field::server, "rapide");
    res->set(http::field::content_type, content_type);
    res->set(http::field::cache_control, "no-cache");
    res->set("X-Accel-Buffering", "no");  // proxies must not hold back tokens
    res->keep_alive(keep_alive_);
    res->chunked(true);
    auto serializer = std::make_shared<http::response_serializer<http::empty_body>>(*res);
    writing_ = true;
    stream_.expires_after(shared_->options.write_timeout);
    http::async_write_header(stream_, *serializer,
                             [self = shared_from_this(), res, serializer](
                                 beast::error_code ec, size_t) { self->after_stream_write(ec); });
  }

  void stream(std::string data) override {
    if (closed_) return;
    pending_ += data;
    if (!writing_) flush();
  }

  void end_stream() override {
    if (closed_) return;
    finish_exchange();
    ending_ = true;
    if (!writing_) flush();
  }

  void on_client_gone(std::function<void()> callback) override {
    gone_callback_ = std::move(callback);
    if (gone_callback_) watch_for_disconnect();
  }

 private:
  void read_request() {
    if (closed_) return;
    parser_.emplace();
    limit_request_parser(*parser_, shared_->options.max_body);
    stream_.expires_after(shared_->options.idle_timeout);
    http::async_read(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->on_read(ec); });
  }

  void on_read(beast::error_code ec) {
    if (ec == http::error::body_limit) {
      keep_alive_ = false;
      version_ = parser_->get().version();
      const api::ApiError error(
          413,
          fmt::format("the request body exceeds the server's limit of {} bytes "
                      "(--max-body)",
                      shared_->options.max_body),
          {}, "body_too_large");
      linger_after_ = true;
      shared_->metrics->observe_status("other", 413);
      respond(413, "application/json", error.to_json(), {});
      return;
    }
    const bool http_error =
        ec && &ec.category() == &http::make_error_code(http::error::bad_method).category();
    if (http_error && ec != http::error::end_of_stream && ec != http::error::partial_message) {
      // A malformed request line or header: answer once, then close.
      keep_alive_ = false;
      const api::ApiError error(400, fmt::format("malformed HTTP request: {}", ec.message()), {},
                                "bad_request");
      shared_->metrics->observe_status("other", 400);
      respond(400, "application/json", error.to_json(), {});
      return;
    }
    if (ec) return close();  // end of stream, timeout, reset
    HttpRequest request = parser_->release();
    version_ = request.version();
    keep_alive_ = request.keep_alive();
    in_exchange_ = true;
    counted_ = true;
    shared_->metrics->request_started();
    try {
      shared_->handler(std::move(request), shared_from_this());
    } catch (const std::exception& e) {
      spdlog::error("request handler failed: {}", e.what());
      if (in_exchange_) {
        respond(500, "application/json", api::ApiError(500, e.what()).to_json(), {});
      }
    }
  }

  // The response is fully decided: the client going away no longer matters to anyone.
  void finish_exchange() {
    in_exchange_ = false;
    gone_callback_ = nullptr;
    ++watch_generation_;
  }

  void after_response(beast::error_code ec, bool eof) {
    uncount();
    if (ec) return close();
    if (linger_after_) return linger();
    if (eof) return shutdown();
    read_request();
  }

  void flush() {
    if (!pending_.empty()) {
      writing_ = true;
      out_ = std::move(pending_);
      pending_.clear();
      stream_.expires_after(shared_->options.write_timeout);
      net::async_write(stream_, http::make_chunk(net::buffer(out_)),
                       [self = shared_from_this()](beast::error_code ec, size_t) {
                         self->after_stream_write(ec);
                       });
    } else if (ending_) {
      ending_ = false;
      writing_ = true;
      stream_.expires_after(shared_->options.write_timeout);
      net::async_write(stream_, http::make_chunk_last(),
                       [self = shared_from_this()](beast::error_code ec, size_t) {
                         self->writing_ = false;
                         self->after_response(ec, !self->keep_alive_);
                       });
    }
  }

  void after_stream_write(beast::error_code ec) {
    writing_ = false;
    if (ec) return client_gone();
    flush();
  }

  // While a response is being generated nothing is read from the socket, so a readable
  // socket with no bytes means the peer closed it: end the generation now rather than
  // when the next token fails to write.
  void watch_for_disconnect() {
    const uint64_t generation = ++watch_generation_;
    stream_.socket().async_wait(
        tcp::socket::wait_read,
        net::bind_executor(stream_.get_executor(),
                           [self = shared_from_this(), generation](beast::error_code ec) {
                             self->on_readable(ec, generation);
                           }));
  }

  void on_readable(beast::error_code ec, uint64_t generation) {
    if (generation != watch_generation_ || !gone_callback_ || closed_) return;
    if (ec == net::error::operation_aborted) return;
    beast::error_code available_ec;
    const size_t available = stream_.socket().available(available_ec);
    if (!ec && !available_ec && available > 0) return;  // a pipelined request: not a hang-up
    client_gone();
  }

  void client_gone() {
    if (closed_) return;
    std::function<void()> callback = std::move(gone_callback_);
    gone_callback_ = nullptr;
    close();
    if (callback) callback();
  }

  void shutdown() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    close();
  }

  void linger() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    stream_.expires_after(kLingerTimeout);
    discard_.resize(16 * 1024);
    stream_.async_read_some(net::buffer(discard_),
                            [self = shared_from_this()](beast::error_code ec, size_t) {
                              if (ec) return self->close();
                              self->linger();
                            });
  }

  void uncount() {
    if (!counted_) return;
    counted_ = false;
    shared_->metrics->request_finished();
  }

  void close() {
    uncount();
    if (closed_) return;
    closed_ = true;
    in_exchange_ = false;
    beast::error_code ec;
    stream_.socket().close(ec);
  }

  beast::tcp_stream stream_;
  std::shared_ptr<const HttpServer::Shared> shared_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  unsigned version_ = 11;
  bool keep_alive_ = true;
  bool in_exchange_ = false;  // a request was handed over and not yet answered
  bool closed_ = false;
  bool counted_ = false;  // in ServeMetrics::requests_in_flight
  bool linger_after_ = false;
  // Streaming state: pending_ collects pieces while out_ is being written.
  bool writing_ = false;
  bool ending_ = false;
  std::string pending_;
  std::string out_;
  std::string discard_;
  std::function<void()> gone_callback_;
  uint64_t watch_generation_ = 0;
};

}  // namespace

HttpServer::HttpServer(net::io_context& io, const HttpServerOptions& options, HttpHandler handler,
                       ServeMetrics& metrics)
    : io_(io),
      acceptor_(net::make_strand(io)),
      retry_timer_(acceptor_.get_executor()),
      shared_(std::make_shared<Shared>()) {
  shared_->options = options;
  shared_->handler = std::move(handler);
  shared_->metrics = &metrics;
}

HttpServer::~HttpServer() = default;

void HttpServer::start() {
  const HttpServerOptions& o = shared_->options;
  beast::error_code ec;
  const net::ip::address address = net::ip::make_address(o.host, ec);
  if (ec) fail(ErrorCode::kInvalidArgument, "--host '{}' is not an IP address", o.host);
  const tcp::endpoint endpoint(address, o.port);
  acceptor_.open(endpoint.protocol(), ec);
  if (!ec) acceptor_.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_.bind(endpoint, ec);
  if (!ec) acceptor_.listen(net::socket_base::max_listen_connections, ec);
  if (ec) fail(ErrorCode::kUnavailable, "cannot listen on {}:{}: {}", o.host, o.port, ec.message());
  port_ = acceptor_.local_endpoint().port();
  accept();
}

void HttpServer::accept() {
  acceptor_.async_accept(net::make_strand(io_), [this](beast::error_code ec, tcp::socket socket) {
    if (ec == net::error::operation_aborted || !acceptor_.is_open()) return;
    if (!ec) {
      beast::error_code ignored;
      socket.set_option(tcp::no_delay(true), ignored);  // tokens are small writes
      std::make_shared<HttpSession>(std::move(socket), shared_)->run();
    } else {
      // Out of descriptors, typically: pause instead of spinning on the same error.
      spdlog::warn("accept failed: {}", ec.message());
      retry_timer_.expires_after(std::chrono::milliseconds(100));
      retry_timer_.async_wait([this](beast::error_code wait_ec) {
        if (!wait_ec) accept();
      });
      return;
    }
    accept();
  });
}

void HttpServer::stop_accepting() {
  net::dispatch(acceptor_.get_executor(), [this] {
    beast::error_code ec;
    acceptor_.close(ec);
  });
}

}  // namespace rapide::serve
