// The URL space: which handler answers which method and path, and the checks every /v1
// request passes first (server state, API key, model name).
//
// Generation requests are parsed, tokenized and rendered on a small worker pool, not on the
// io thread that read them: a 4 MiB prompt takes seconds to tokenize, and every other
// connection of that io thread would wait as long. The job then starts on the connection's
// strand.
//
//   POST /v1/completions, /v1/chat/completions   generation (src/api, generation.h)
//   GET  /v1/models, /v1/models/{id}            the served model
//   GET  /v1/engine/state                       the advisor's record (advise/engine_state.h)
//   GET  /health                                ready (200) / loading / draining (503)
//   GET  /metrics                               Prometheus text (metrics.h)
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <string>

#include <boost/asio/thread_pool.hpp>

#include "advise/engine_state.h"
#include "api/chat.h"
#include "api/openai_protocol.h"
#include "engine/engine.h"
#include "serve/auth.h"
#include "serve/http_server.h"
#include "serve/metrics.h"

namespace rapide::serve {

enum class ServerState { kLoading = 0, kReady = 1, kDraining = 2 };
const char* server_state_name(ServerState state);

// What /v1/models says about the model being served.
struct ServedModel {
  std::string id;           // what clients put in "model"
  std::string description;  // e.g. "demo (random weights)" or the file it came from
  int64_t created = 0;      // Unix seconds the server loaded it
};

class Router {
 public:
  Router(ApiKeys keys, ServeMetrics& metrics);
  // Whether /v1/* requires an API key.
  bool auth_enabled() const { return keys_.enabled(); }
  ~Router();

  // Makes the model servable: state becomes ready. Call once; the engine must outlive the
  // server's io threads.
  void attach(Engine& engine, ServedModel model);
  void set_state(ServerState state) { state_.store(state, std::memory_order_release); }
  ServerState state() const { return state_.load(std::memory_order_acquire); }

  // The HttpHandler: answers every request, errors included.
  void handle(HttpRequest&& request, std::shared_ptr<HttpExchange> exchange);
  // Waits for the request parsing in progress; call after the io threads stopped, while
  // the engine (its tokenizer) is still alive. Idempotent.
  void stop_workers() { workers_.join(); }

 private:
  void dispatch(HttpRequest& request, const std::string& path,
                const std::shared_ptr<HttpExchange>& exchange, std::string& label);
  void generate(HttpRequest& request, api::Endpoint endpoint,
                const std::shared_ptr<HttpExchange>& exchange, const std::string& label);
  // Answers a request that failed with `error` (ApiError, Error or any exception); on the
  // exchange's strand. `what` ("POST /v1/completions") names it in the log.
  void answer_failure(HttpExchange& exchange, const std::string& what, const std::string& label,
                      std::exception_ptr error);
  void list_models(const std::string& path, const std::shared_ptr<HttpExchange>& exchange);
  void engine_state(const std::shared_ptr<HttpExchange>& exchange);

  ApiKeys keys_;
  ServeMetrics& metrics_;
  std::atomic<ServerState> state_{ServerState::kLoading};
  // Set once by attach() before the state turns ready; read only in the ready state.
  Engine* engine_ = nullptr;
  ServedModel model_;
  std::unique_ptr<api::ChatPrompter> chat_;
  // Machine facts for /v1/engine/state: the bandwidth probe runs once, on the first request.
  std::once_flag machine_once_;
  advise::MachineFacts machine_;
  boost::asio::thread_pool workers_{2};  // request parsing off the io threads
};

}  // namespace rapide::serve
