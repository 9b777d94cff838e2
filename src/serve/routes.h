// The URL space: which handler answers which method and path, and the checks every /v1
// request passes first (server state, API key, model name).
//
// Every request whose text is tokenized (generation, embeddings, /tokenize, /detokenize) is
// parsed on a small worker pool, not on the io thread that read it: a 4 MiB prompt (the
// --max-body default) takes seconds to tokenize, and every other connection of that io
// thread would wait as long. Generation then starts on the connection's strand; embeddings
// and the engine state's bandwidth probe run on the engine thread between its steps
// (engine/background_task.h).
//
//   POST /v1/completions, /v1/chat/completions   generation (src/api, generation.h)
//   GET  /v1/models, /v1/models/{id}            the served model
//   GET  /v1/engine/state                       the advisor's record (advise/engine_state.h)
//   GET  /health                                ready (200) / loading / draining (503)
//   GET  /metrics                               Prometheus text (metrics.h)
//   POST /v1/embeddings                         pooled hidden states (embeddings.h)
//   POST /tokenize, /detokenize                 the tokenizer (tokenize_endpoints.h)
//   GET  /dashboard, /dashboard/*               the live dashboard's files (dashboard_assets.h)
//   GET  /dashboard/state                       its JSON, behind the key (dashboard_state.h)
//   POST /completion, /infill, /apply-template   llama-server's native API (llama_server_api.h)
//   GET  /props, /slots, /version                ... its server state, and rapide's build
//   POST /rerank, /v1/rerank                     501: no reranking model (llama_server_routes.cpp)
//   GET  /                                      302 to /dashboard
//   OPTIONS any                                 CORS preflight, with --allowed-origins (cors.h)
//
// Every request gets an id (the client's X-Request-Id, else req-N), echoed in the response's
// X-Request-Id, and one log line when its response is complete (request_log.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/thread_pool.hpp>

#include "advise/engine_state.h"
#include "api/chat.h"
#include "api/openai_protocol.h"
#include "engine/engine.h"
#include "formats/model_summary.h"
#include "serve/anthropic_exchange.h"
#include "serve/auth.h"
#include "serve/cors.h"
#include "serve/dashboard_advice.h"
#include "serve/embeddings.h"
#include "serve/http_server.h"
#include "serve/llama_server_api.h"
#include "serve/metrics.h"
#include "serve/prompt_compression.h"
#include "serve/request_log.h"

namespace rapide::serve {

// 405 with Allow unless the request's method is `wanted` (HEAD passes for GET).
void require_method(const HttpRequest& request, boost::beast::http::verb wanted,
                    const std::string& path);

enum class ServerState { kLoading = 0, kReady = 1, kDraining = 2 };
const char* server_state_name(ServerState state);

// What binary serves: `rapide --version`'s release, commit and build type.
struct BuildInfo {
  std::string version;  // "0.1.0"
  std::string commit;   // "6c5e8e0a1b2c", "unknown" outside a git checkout
  std::string type;     // "Release"
};

// The model being served: what /v1/models says about it, and the chat template override.
struct ServedModel {
  std::string id;             // what clients put in "model"
  std::string description;    // e.g. "demo (random weights)" or the file name it came from
  int64_t created = 0;        // Unix seconds the server loaded it
  ModelSummary summary;       // parameters, file size, weight type
  std::string chat_template;  // --chat-template's source; empty: the model's own
  std::shared_ptr<const ModelFile> file;  // for /v1/embeddings' own Model; null: no embeddings
  int threads = 1;                        // of that Model's pool
  std::string tool_call_parser;           // --tool-call-parser; empty: from the chat template
  BuildInfo build;                        // /version, /props' build_info
};

// The router's switches from the command line.
struct RouterOptions {
  std::vector<std::string> allowed_origins;  // CORS; empty: off
  bool log_prompts = false;                  // prompt text in the request log
  Pooling pooling = Pooling::kLast;          // /v1/embeddings
  // The "compression" extension's scoring model (--compressor-model); null: the served one.
  std::shared_ptr<const ModelFile> compressor_file;
};

class Router {
 public:
  Router(ApiKeys keys, ServeMetrics& metrics, RouterOptions options = {});
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
  void stop_workers() {
    workers_.join();
    large_workers_.join();
  }

 private:
  void dispatch(HttpRequest& request, const std::string& path,
                const std::shared_ptr<LoggedExchange>& exchange, std::string& label);
  // The "compression" extension: rewrites the body's marked context before it is parsed.
  std::optional<CompressionOutcome> compress_prompt(nlohmann::json& body, api::Endpoint endpoint);
  // `anthropic` (POST /v1/messages): the body is Anthropic's, translated into a chat body
  // first, and the answer is written through that exchange, which translates it back.
  void generate(HttpRequest& request, api::Endpoint endpoint,
                const std::shared_ptr<LoggedExchange>& exchange, const std::string& label,
                std::shared_ptr<AnthropicExchange> anthropic = nullptr);
  // POST /v1/messages and /v1/messages/count_tokens, every answer in Anthropic's shapes.
  void anthropic_messages(HttpRequest& request, const std::string& path,
                          const std::shared_ptr<LoggedExchange>& exchange, std::string& label);
  // Answers a request that failed with `error` (ApiError, Error or any exception); on the
  // exchange's strand. `what` ("POST /v1/completions") names it in the log.
  void answer_failure(HttpExchange& exchange, const std::string& what, const std::string& label,
                      std::exception_ptr error);
  void list_models(const std::string& path, const std::shared_ptr<HttpExchange>& exchange);
  // /tokenize and /detokenize, answered from the worker pool.
  void tokenizer_route(HttpRequest& request, const std::string& path,
                       const std::shared_ptr<HttpExchange>& exchange);
  void require_ready_state() const;
  // 401 unless the request carries an accepted key (when --api-key is set).
  // Anthropic's clients may send the key as "x-api-key: <key>" instead.
  void require_api_key(const HttpRequest& request, bool allow_x_api_key = false) const;
  void dashboard(const HttpRequest& request, const std::string& path,
                 const std::shared_ptr<HttpExchange>& exchange);
  nlohmann::json dashboard_snapshot();
  // Runs make_body on the worker pool (work too slow for an io thread), then answers 200 with
  // its JSON on the exchange's strand, or the failure it threw; `what` names it in the log,
  // `label` in the metrics. Any thread may call it.
  // `body_bytes`, the size of the request body make_body reads, chooses the pool (pool_for).
  void answer_json_from_worker(const std::shared_ptr<HttpExchange>& exchange, std::string what,
                               std::string label, std::function<std::string()> make_body,
                               HeaderList headers = {}, size_t body_bytes = 0);
  // The pool that parses and tokenizes a request body of `body_bytes`: a large body (3.6 MB
  // take ~10 s to tokenize on a 32000-token vocabulary) runs on a pool of its own, so large
  // requests queue behind each other and cannot hold every worker while small ones wait
  // (e2e_adversarial: two 3.6 MB /tokenize requests delayed a 4-token completion 10 s).
  static constexpr size_t kLargeBody = 64 * 1024;
  boost::asio::thread_pool& pool_for(size_t body_bytes) {
    return body_bytes > kLargeBody ? large_workers_ : workers_;
  }
  // Parsed on a worker; the passes run between engine steps, stopped when the client goes.
  void embeddings(HttpRequest& request, const std::shared_ptr<LoggedExchange>& exchange);
  void engine_state(const std::shared_ptr<HttpExchange>& exchange);
  // llama-server's native endpoints (llama_server_routes.cpp); false: not one of its paths.
  bool llama_server_route(HttpRequest& request, const std::string& path,
                          const std::shared_ptr<LoggedExchange>& exchange, std::string& label);
  // POST /completion and /infill: parsed on a worker, then run as /v1/completions is.
  void native_completion(HttpRequest& request, bool infill,
                         const std::shared_ptr<LoggedExchange>& exchange, const std::string& label);
  nlohmann::json props_json() const;
  nlohmann::json slots_json() const;
  // The most sequences the engine runs at once: llama-server's "total_slots".
  int total_slots() const;
  void answer_engine_state(const std::shared_ptr<HttpExchange>& exchange, double read_bandwidth);

  ApiKeys keys_;
  ServeMetrics& metrics_;
  RouterOptions options_;
  CorsPolicy cors_;
  std::atomic<uint64_t> next_request_{1};
  std::atomic<ServerState> state_{ServerState::kLoading};
  // Set once by attach() before the state turns ready; read only in the ready state.
  Engine* engine_ = nullptr;
  ServedModel model_;
  std::unique_ptr<api::ChatPrompter> chat_;
  std::unique_ptr<Embedder> embedder_;
  std::unique_ptr<RequestCompressor> compressor_;  // null: no model file to score with
  llama::FimTokens fim_;                           // /infill's tokens, found at attach()
  // /v1/engine/state's read bandwidth: measured once, between engine steps, on the first
  // request (advise/bandwidth_probe_task.h), then kept; requests that arrive while the probe
  // runs wait for its figure. Guarded by bandwidth_mutex_.
  std::mutex bandwidth_mutex_;
  std::optional<double> read_bandwidth_;
  bool bandwidth_probing_ = false;
  std::vector<std::shared_ptr<HttpExchange>> bandwidth_waiting_;
  DashboardAdvice advice_;            // the dashboard's findings, refreshed every few seconds
  TimePoint started_ = Clock::now();  // the dashboard's clock
  // Last: destroyed (joined) first, so no parse in progress outlives the members it uses.
  boost::asio::thread_pool large_workers_{1};  // bodies above kLargeBody, one at a time
  boost::asio::thread_pool workers_{2};        // request parsing off the io threads
};

}  // namespace rapide::serve
