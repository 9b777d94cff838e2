// `rapide serve` as an object: io threads, the HTTP server, the router, signal handling and
// the drain on SIGTERM / SIGINT.
//
// The server listens before the model is loaded, so /health can say "loading"; attach()
// makes it ready. wait() returns after a signal once the drain is done: no new connections,
// running requests finish (bounded by drain_timeout, then aborted) and their last bytes
// are written.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>

#include "engine/engine.h"
#include "serve/http_server.h"
#include "serve/metrics.h"
#include "serve/routes.h"
#include "serve/stats_log.h"

namespace rapide::serve {

struct ServerOptions {
  HttpServerOptions http;
  int io_threads = 1;
  std::chrono::milliseconds drain_timeout{30000};
  std::vector<std::string> api_keys;
  std::string api_key_file;
  RouterOptions router;
  // Seconds between the engine lines logged while busy (stats_log.h); 0 = never.
  double log_stats_interval_s = 10.0;
};

class Server {
 public:
  // Reads the API keys (throws Error for an unreadable key file).
  explicit Server(const ServerOptions& options);
  ~Server();  // stops the io threads if wait() did not

  // Listens, starts the io threads and catches SIGTERM / SIGINT. Throws Error(kUnavailable)
  // when the address cannot be bound.
  void start();
  uint16_t port() const { return http_->port(); }
  // The model is ready: /v1 requests are served from now on.
  void attach(Engine& engine, ServedModel model);
  // Whether a signal arrived (e.g. while the model was loading).
  bool stop_requested() const;
  // Blocks until a signal (or request_stop), then drains. Returns true if every running
  // request finished within the drain timeout.
  bool wait();
  void request_stop();

 private:
  // One io thread's loop: io_.run(), resumed after an exception escapes a handler, so no
  // single connection can take the process down.
  void run_io();
  void watch_signals();
  void stop_io();
  void schedule_stats_line();

  ServerOptions options_;
  boost::asio::io_context io_;
  ServeMetrics metrics_;
  std::unique_ptr<Router> router_;
  std::unique_ptr<HttpServer> http_;
  boost::asio::signal_set signals_;
  boost::asio::steady_timer stats_timer_;
  StatsLog stats_log_;  // touched only by the timer's handler
  std::vector<std::thread> threads_;
  Engine* engine_ = nullptr;

  mutable std::mutex mutex_;
  std::condition_variable stop_;
  bool stop_requested_ = false;
};

}  // namespace rapide::serve
