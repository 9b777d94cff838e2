#include "serve/http_server.h"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <list>
#include <mutex>
#include <optional>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <cerrno>

#include "api/api_error.h"
#include "base/error.h"
#include "base/logging.h"

namespace rapide::serve {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

namespace {
class HttpSession;
}  // namespace

struct HttpServer::Shared {
  HttpServerOptions options;
  HttpHandler handler;
  ServeMetrics* metrics;
  size_t max_connections = 0;  // resolved by start()

  // Connections waiting for a request, oldest first: the ones evicted at the cap.
  std::mutex mutex;
  std::list<std::weak_ptr<HttpSession>> idle;
  size_t open = 0;  // sessions alive
};

namespace {

using IdleList = std::list<std::weak_ptr<HttpSession>>;

constexpr uint32_t kHeaderLimit = 64 * 1024;
// Beast (1.74) applies neither header_limit nor body_limit to the trailer of a chunked body,
// and its field store throws std::length_error for a value of 64 KiB: the read buffer's
// capacity is what bounds trailers. Everything parsed from the buffer (the head, chunk
// headers, the trailer) must fit in it; body bytes pass through it into the body, bounded by
// --max-body. Below 64 KiB - 2, so no single field can reach Beast's throwing size.
constexpr size_t kReadBufferLimit = kHeaderLimit - 1024;
// After refusing a body (413) the client may still be sending it; reading it away for a
// moment before closing lets the client see the response instead of a connection reset.
constexpr std::chrono::seconds kLingerTimeout{2};
// Descriptors kept free of connections for model files, offload blocks and logs.
constexpr size_t kReservedDescriptors = 256;
// How often a connection waiting for its answer is peeked at (disconnect watch): soon after
// the request, then periodically; a closed client's reset to the close probe arrives within
// a round trip.
constexpr std::chrono::milliseconds kFirstPeerPoll{50};
constexpr std::chrono::milliseconds kPeerPollPeriod{500};

class HttpSession final : public HttpExchange, public std::enable_shared_from_this<HttpSession> {
 public:
  HttpSession(tcp::socket&& socket, std::shared_ptr<HttpServer::Shared> shared)
      : stream_(std::move(socket)), shared_(std::move(shared)), buffer_(kReadBufferLimit) {
    shared_->metrics->connection_opened();
    std::lock_guard<std::mutex> lock(shared_->mutex);
    ++shared_->open;
  }
  ~HttpSession() override {
    uncount();
    shared_->metrics->connection_closed();
    std::lock_guard<std::mutex> lock(shared_->mutex);
    if (idle_entry_) shared_->idle.erase(*idle_entry_);
    --shared_->open;
  }

  // `refuse`: the server is at its connection cap with nobody idle to evict: answer 503.
  void run(bool refuse) {
    net::dispatch(stream_.get_executor(), [self = shared_from_this(), refuse] {
      if (!refuse) return self->read_request();
      self->keep_alive_ = false;
      self->linger_after_ = true;
      const api::ApiError error(
          503, "the server is at its connection limit (--max-connections); retry shortly", {},
          "too_many_connections");
      self->shared_->metrics->observe_status("other", 503);
      self->respond(503, "application/json", error.to_json(), {{"Retry-After", "1"}});
    });
  }

  // At the connection cap: close this connection if it is still only waiting for a request.
  void evict() {
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] {
      if (self->waiting_ && !self->closed_) self->close();
    });
  }

  net::any_io_executor executor() override { return stream_.get_executor(); }

  void respond(int status, const std::string& content_type, std::string body,
               const HeaderList& headers) override {
    if (closed_) return;
    if (probing_) {
      // The close probe is being written: the answer follows it.
      after_probe_ = [self = shared_from_this(), status, content_type, body = std::move(body),
                      headers]() mutable {
        self->respond(status, content_type, std::move(body), headers);
      };
      return;
    }
    finish_exchange();
    auto res = std::make_shared<http::response<http::string_body>>(
        static_cast<http::status>(status), version_);
    res->set(http::field::server, "rapide");
    res->set(http::field::content_type, content_type);
    for (const auto& [name, value] : headers) res->set(name, value);
    res->keep_alive(keep_alive_);
    res->body() = std::move(body);
    res->prepare_payload();
    // HEAD: the headers a GET would get (Content-Length included), never the body.
    if (head_request_) res->body().clear();
    stream_.expires_after(shared_->options.write_timeout);
    http::async_write(stream_, *res,
                      [self = shared_from_this(), res](beast::error_code ec, size_t) {
                        self->after_response(ec, res->need_eof());
                      });
  }

  void start_stream(const std::string& content_type) override {
    if (closed_) return;
    stream_started_ = true;
    auto res = std::make_shared<http::response<http::empty_body>>(http::status::ok, version_);
    res->set(http::field::server, "rapide");
    res->set(http::field::content_type, content_type);
    res->set(http::field::cache_control, "no-cache");
    res->set("X-Accel-Buffering", "no");  // proxies must not hold back tokens
    if (version_ < 11) {
      // HTTP/1.0 knows no chunked encoding: the body is the raw bytes, ended by the close.
      raw_stream_ = true;
      keep_alive_ = false;
    }
    res->keep_alive(keep_alive_);
    res->chunked(!raw_stream_);
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
    if (pending_.size() > shared_->options.max_pending_bytes) {
      // The client stopped reading: holding its tokens would grow without bound, and
      // pausing would hold its KV; it is treated as gone, which aborts the generation.
      spdlog::warn("a streaming client left {} bytes unread (--max-pending-bytes): aborted",
                   pending_.size());
      return client_gone();
    }
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
  // Reads the head first (to answer `Expect: 100-continue` before the body comes), then the
  // body. A new connection must complete its head within header_timeout; between requests
  // a keep-alive connection may wait idle_timeout, and may be evicted at the cap meanwhile.
  void read_request() {
    if (closed_) return;
    parser_.emplace();
    parser_->body_limit(shared_->options.max_body);
    parser_->header_limit(kHeaderLimit);
    stream_.expires_after(requests_ == 0 ? shared_->options.header_timeout
                                         : shared_->options.idle_timeout);
    set_waiting(true);
    http::async_read_header(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->on_header(ec); });
  }

  void on_header(beast::error_code ec) {
    set_waiting(false);
    if (ec) return on_read(ec);
    ++requests_;
    stream_.expires_after(shared_->options.idle_timeout);
    const HttpRequest& head = parser_->get();
    if (head.version() >= 11 && !parser_->is_done() &&
        beast::iequals(head[http::field::expect], "100-continue")) {
      auto interim =
          std::make_shared<http::response<http::empty_body>>(http::status::continue_, 11);
      http::async_write(stream_, *interim,
                        [self = shared_from_this(), interim](beast::error_code ec, size_t) {
                          if (ec) return self->close();
                          self->read_body();
                        });
      return;
    }
    read_body();
  }

  void read_body() {
    http::async_read(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->on_read(ec); });
  }

  // Registers the connection as evictable (waiting for a request) or not; on the strand.
  void set_waiting(bool waiting) {
    waiting_ = waiting;
    std::lock_guard<std::mutex> lock(shared_->mutex);
    if (waiting && !idle_entry_) {
      idle_entry_ = shared_->idle.insert(shared_->idle.end(), weak_from_this());
    } else if (!waiting && idle_entry_) {
      shared_->idle.erase(*idle_entry_);
      idle_entry_.reset();
    }
  }

 public:
  // Removes the oldest waiting connection from the idle list (under Shared::mutex).
  static std::shared_ptr<HttpSession> take_oldest_idle(HttpServer::Shared& shared) {
    for (auto it = shared.idle.begin(); it != shared.idle.end(); ++it) {
      // An entry that does not lock is a session being destroyed: its destructor erases it.
      if (std::shared_ptr<HttpSession> session = it->lock()) {
        shared.idle.erase(it);
        session->idle_entry_.reset();
        return session;
      }
    }
    return nullptr;
  }

 private:
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
    keep_alive_ = request.keep_alive() && !peer_eof_;
    head_request_ = request.method() == http::verb::head;
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
      auto done = [self = shared_from_this()](beast::error_code ec, size_t) {
        self->after_stream_write(ec);
      };
      if (raw_stream_) {
        net::async_write(stream_, net::buffer(out_), std::move(done));
      } else {
        net::async_write(stream_, http::make_chunk(net::buffer(out_)), std::move(done));
      }
    } else if (ending_ && raw_stream_) {
      ending_ = false;
      after_response({}, true);  // the close ends an HTTP/1.0 stream
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

  // While a response is being generated nothing is read from the socket, so the client
  // hanging up shows as end of stream (or a reset) there: end the generation now rather
  // than when the next token fails to write. Readiness alone proves nothing (with several
  // io threads the epoll event of the request's own bytes, already read speculatively, can
  // reach a wait started after them; an edge that came before the wait is never seen), so
  // the socket is peeked at on readiness and also polled.
  void watch_for_disconnect() {
    const uint64_t generation = ++watch_generation_;
    wait_readable(generation);
    poll_peer(generation, kFirstPeerPoll);
  }

  void wait_readable(uint64_t generation) {
    stream_.socket().async_wait(
        tcp::socket::wait_read,
        net::bind_executor(stream_.get_executor(),
                           [self = shared_from_this(), generation](beast::error_code ec) {
                             if (!self->watching(generation) || ec == net::error::operation_aborted)
                               return;
                             if (ec) return self->client_gone();
                             // Once at end of stream the socket stays readable: polls only.
                             if (self->observe_peer() == Peer::kQuiet)
                               self->wait_readable(generation);
                           }));
  }

  void poll_peer(uint64_t generation, std::chrono::milliseconds delay) {
    peer_timer_.expires_after(delay);
    peer_timer_.async_wait(net::bind_executor(
        stream_.get_executor(), [self = shared_from_this(), generation](beast::error_code ec) {
          if (ec || !self->watching(generation)) return;
          const Peer peer = self->observe_peer();
          // After end of stream only a reset (the answer to the close probe) is news.
          if (peer == Peer::kQuiet || (peer == Peer::kEof && self->probe_sent_)) {
            self->poll_peer(generation, kPeerPollPeriod);
          }
        }));
  }

  bool watching(uint64_t generation) const {
    return generation == watch_generation_ && gone_callback_ && !closed_;
  }

  enum class Peer { kQuiet, kData, kEof, kGone };

  // Peeks at the socket without reading and acts on what the client did.
  Peer observe_peer() {
    char byte;
    const ssize_t n = ::recv(stream_.socket().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n > 0) return Peer::kData;  // a pipelined request: read after this response
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return Peer::kQuiet;
    if (n < 0) {
      client_gone();  // reset
      return Peer::kGone;
    }
    // End of stream: the client either closed or only half-closed (shutdown(SHUT_WR) after
    // its request), which HTTP allows; it still gets its answer, and no further request can
    // come. A stream finds a closed client out by its next write failing; an answer not yet
    // begun sends the close probe. The reset that answers the probe is not reported by
    // recv() after end of stream, but the connection's state shows it.
    if (!peer_eof_) {
      peer_eof_ = true;
      keep_alive_ = false;
      if (!stream_started_ && version_ >= 11) probe_for_close();
    } else if (probe_sent_ && reset_by_peer()) {
      client_gone();
      return Peer::kGone;
    }
    return Peer::kEof;
  }

  // Whether the kernel closed the connection (a reset came).
  bool reset_by_peer() {
    tcp_info info{};
    socklen_t size = sizeof(info);
    return ::getsockopt(stream_.socket().native_handle(), IPPROTO_TCP, TCP_INFO, &info, &size) ==
               0 &&
           info.tcpi_state == TCP_CLOSE;
  }

  // Both ends of a closed connection look alike until data is sent: a host whose socket is
  // closed answers it with a reset (which the polls then see), a half-closed client reads
  // it. The data is an interim "100 Continue", which every HTTP/1.1 client must accept and
  // skip (RFC 9110, 15.2).
  void probe_for_close() {
    probing_ = true;
    probe_sent_ = true;
    auto interim = std::make_shared<http::response<http::empty_body>>(http::status::continue_, 11);
    http::async_write(stream_, *interim,
                      [self = shared_from_this(), interim](beast::error_code ec, size_t) {
                        self->probing_ = false;
                        if (ec) return self->client_gone();
                        if (self->after_probe_) {
                          auto answer = std::move(self->after_probe_);
                          self->after_probe_ = nullptr;
                          answer();
                        }
                      });
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
    peer_timer_.cancel();
    beast::error_code ec;
    stream_.socket().close(ec);
  }

  beast::tcp_stream stream_;
  std::shared_ptr<HttpServer::Shared> shared_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  unsigned version_ = 11;
  bool keep_alive_ = true;
  bool in_exchange_ = false;  // a request was handed over and not yet answered
  bool closed_ = false;
  bool counted_ = false;  // in ServeMetrics::requests_in_flight
  bool linger_after_ = false;
  bool head_request_ = false;  // HEAD: the response goes without its body
  bool peer_eof_ = false;      // the client half-closed (or closed) its side
  bool raw_stream_ = false;    // an HTTP/1.0 stream: no chunked encoding
  bool stream_started_ = false;
  bool probing_ = false;                                  // the close probe is being written
  bool probe_sent_ = false;                               // ... or was
  std::function<void()> after_probe_;                     // an answer decided while it was written
  net::steady_timer peer_timer_{stream_.get_executor()};  // disconnect watch polls
  bool waiting_ = false;  // between requests: evictable at the connection cap
  std::optional<IdleList::iterator> idle_entry_;  // in Shared::idle; under Shared::mutex
  uint64_t requests_ = 0;                         // heads read on this connection
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

// The connection cap: the configured one, but never more than the descriptor limit allows
// (raised to its hard maximum first), so accept() does not fail for lack of descriptors.
static size_t connection_cap(size_t configured) {
  rlimit limit{};
  size_t allowed = 1024;
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0) {
    if (limit.rlim_cur < limit.rlim_max) {
      rlimit raised = limit;
      raised.rlim_cur = limit.rlim_max;
      if (setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
    }
    allowed = static_cast<size_t>(limit.rlim_cur);
  }
  allowed = allowed > 2 * kReservedDescriptors ? allowed - kReservedDescriptors : allowed / 2;
  return configured == 0 ? allowed : std::min(configured, allowed);
}

void HttpServer::start() {
  const HttpServerOptions& o = shared_->options;
  shared_->max_connections = connection_cap(o.max_connections);
  if (o.max_connections != 0 && shared_->max_connections < o.max_connections) {
    spdlog::warn("--max-connections {} exceeds the descriptor limit: {} connections at most",
                 o.max_connections, shared_->max_connections);
  }
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
  spdlog::info("at most {} connections; request heads within {} s", shared_->max_connections,
               o.header_timeout.count());
  accept();
}

void HttpServer::accept() {
  acceptor_.async_accept(net::make_strand(io_), [this](beast::error_code ec, tcp::socket socket) {
    if (ec == net::error::operation_aborted || !acceptor_.is_open()) return;
    if (!ec) {
      beast::error_code ignored;
      socket.set_option(tcp::no_delay(true), ignored);  // tokens are small writes
      std::shared_ptr<HttpSession> evicted;
      bool refuse = false;
      {
        std::lock_guard<std::mutex> lock(shared_->mutex);
        if (shared_->open >= shared_->max_connections) {
          evicted = HttpSession::take_oldest_idle(*shared_);
          refuse = !evicted;
        }
      }
      if (evicted) evicted->evict();
      std::make_shared<HttpSession>(std::move(socket), shared_)->run(refuse);
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
