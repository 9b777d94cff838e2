#include "serve/server.h"

#include <csignal>
#include <cstdlib>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>

#include "base/clock.h"
#include "base/logging.h"

namespace rapide::serve {

namespace {
// After the engine drained, the last events still travel to their connections' strands and
// out of the sockets; this bounds that wait.
constexpr std::chrono::seconds kFlushTimeout{5};
}  // namespace

Server::Server(const ServerOptions& options)
    : options_(options),
      router_(std::make_unique<Router>(ApiKeys(options.api_keys, options.api_key_file), metrics_,
                                       options.router)),
      signals_(io_, SIGINT, SIGTERM),
      stats_timer_(io_) {
  http_ = std::make_unique<HttpServer>(
      io_, options_.http,
      [router = router_.get()](HttpRequest&& request, std::shared_ptr<HttpExchange> exchange) {
        router->handle(std::move(request), std::move(exchange));
      },
      metrics_);
}

Server::~Server() {
  stop_io();
}

void Server::start() {
  http_->start();
  watch_signals();
  const int n = std::max(1, options_.io_threads);
  for (int i = 0; i < n; ++i) threads_.emplace_back([this] { run_io(); });
  spdlog::info("listening on http://{}:{} ({} io thread{}; API key authentication {})",
               options_.http.host, http_->port(), n, n == 1 ? "" : "s",
               router_->auth_enabled() ? "on" : "off");
}

void Server::run_io() {
  // An exception from a handler (or from a library beneath one, as Beast's parser) unwinds
  // out of run(): the operation that threw is gone with its connection, and everyone else's
  // must go on. run() may be called again without restart() (Asio's documented pattern).
  for (;;) {
    try {
      io_.run();
      return;
    } catch (const std::exception& e) {
      spdlog::error("a connection failed with an exception: {}", e.what());
    } catch (...) {
      spdlog::error("a connection failed with an unknown exception");
    }
  }
}

void Server::watch_signals() {
  signals_.async_wait([this](const boost::system::error_code& ec, int signal) {
    if (ec) return;
    spdlog::info("received {}: draining (a second signal exits at once)",
                 signal == SIGTERM ? "SIGTERM" : "SIGINT");
    request_stop();
    signals_.async_wait([](const boost::system::error_code& second, int) {
      if (second) return;
      spdlog::warn("second signal: exiting without finishing the drain");
      std::_Exit(1);
    });
  });
}

void Server::attach(Engine& engine, ServedModel model) {
  engine_ = &engine;
  router_->attach(engine, std::move(model));
  if (options_.log_stats_interval_s > 0) {
    boost::asio::post(io_, [this] {
      stats_log_ = StatsLog(Clock::now());  // the engine's counters start now
      schedule_stats_line();
    });
  }
}

void Server::schedule_stats_line() {
  stats_timer_.expires_after(
      std::chrono::milliseconds(static_cast<int64_t>(options_.log_stats_interval_s * 1000.0)));
  stats_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;  // cancelled: the server stops
    if (auto line = stats_log_.line(engine_->stats(), Clock::now(), log_format())) {
      spdlog::info("{}", *line);
    }
    schedule_stats_line();
  });
}

bool Server::stop_requested() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stop_requested_;
}

void Server::request_stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_requested_ = true;
  }
  stop_.notify_all();
}

bool Server::wait() {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    stop_.wait(lock, [this] { return stop_requested_; });
  }
  router_->set_state(ServerState::kDraining);
  http_->stop_accepting();
  bool finished = true;
  if (engine_) {
    const TimePoint start = Clock::now();
    finished = engine_->drain(options_.drain_timeout);
    spdlog::info("drain: {} in {:.2f} s",
                 finished ? "every request finished" : "timed out, rest aborted",
                 seconds_between(start, Clock::now()));
    const TimePoint deadline = Clock::now() + kFlushTimeout;
    while (metrics_.requests_in_flight() > 0 && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  stop_io();
  return finished;
}

void Server::stop_io() {
  // The stats timer's pending wait needs no cancel (which would race its handler on an io
  // thread): once io_ stops, it never runs, and the timer's destructor discards it.
  io_.stop();
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
  router_->stop_workers();
}

}  // namespace rapide::serve
