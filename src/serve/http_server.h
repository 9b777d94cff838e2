// The HTTP/1.1 front door: an Asio acceptor and one Beast session per connection.
//
// Everything runs on a small io_context pool; each connection is a strand, so thousands of
// idle or streaming connections cost memory, not threads. A session reads one request at a
// time (keep-alive), enforces the body limit (413) and idle timeout, hands the request to
// the handler as an HttpExchange and writes whatever the handler answers, whole or chunked
// (HTTP/1.0 clients get streams without chunked encoding, ended by closing the connection).
//
// Bounded cost per client: a connection must send its first request head within
// header_timeout; at max_connections the oldest connection idle between requests is closed
// to make room (none idle: the newcomer gets 503); a streaming client that lets more than
// max_pending_bytes of response pile up unread is treated as gone (its request aborted).
//
// HTTP details: HEAD gets a GET's headers without the body; `Expect: 100-continue` is
// answered once the head is read; a client that half-closes after its request still gets
// the answer, while one that closed is told apart by an interim 100 Continue probe (a closed
// socket answers it with a reset) and its request aborted.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include "serve/http_exchange.h"
#include "serve/metrics.h"

namespace rapide::serve {

using HttpRequest = boost::beast::http::request<boost::beast::http::string_body>;
// Called on the connection's strand; must eventually answer through the exchange.
using HttpHandler = std::function<void(HttpRequest&& request, std::shared_ptr<HttpExchange>)>;

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 8080;  // 0 = any free port
  uint64_t max_body = 4 << 20;
  std::chrono::seconds idle_timeout{120};   // keep-alive connection without a request
  std::chrono::seconds write_timeout{120};  // a client that stops reading a response
  std::chrono::seconds header_timeout{10};  // a new connection's first request head
  // Open connections at most; 0 = as many as the descriptor limit allows (see start()).
  size_t max_connections = 0;
  size_t max_pending_bytes = 8 << 20;  // unwritten stream bytes per connection
};

class HttpServer {
 public:
  HttpServer(boost::asio::io_context& io, const HttpServerOptions& options, HttpHandler handler,
             ServeMetrics& metrics);
  ~HttpServer();
  // Binds and starts accepting. Throws Error(kUnavailable) naming the address when the
  // port cannot be bound.
  void start();
  uint16_t port() const { return port_; }
  // Closes the listening socket; open connections keep being served.
  void stop_accepting();

  struct Shared;  // what every session reads: options, handler, metrics

 private:
  void accept();

  boost::asio::io_context& io_;
  boost::asio::ip::tcp::acceptor acceptor_;
  boost::asio::steady_timer retry_timer_;
  std::shared_ptr<Shared> shared_;
  uint16_t port_ = 0;
};

}  // namespace rapide::serve
