#include "serve/routes.h"

#include <boost/asio/post.hpp>
#include <boost/beast/http/field.hpp>
#include <boost/beast/http/verb.hpp>

#include "advise/bandwidth_probe_task.h"
#include "api/anthropic_messages.h"
#include "api/api_error.h"
#include "api/front_end.h"
#include "api/openai_protocol.h"
#include "api/openai_responses.h"
#include "base/error.h"
#include "base/logging.h"
#include "serve/dashboard_assets.h"
#include "serve/dashboard_state.h"
#include "serve/generation.h"
#include "serve/tokenize_endpoints.h"

namespace rapide::serve {

namespace http = boost::beast::http;
using nlohmann::json;

namespace {

constexpr const char* kJson = "application/json";
constexpr const char* kPrometheus = "text/plain; version=0.0.4; charset=utf-8";

void send_error(HttpExchange& exchange, const api::ApiError& e) {
  HeaderList headers;
  if (e.retry_after()) headers.emplace_back("Retry-After", std::to_string(*e.retry_after()));
  if (!e.allow().empty()) headers.emplace_back("Allow", e.allow());
  if (e.status() == 401) headers.emplace_back("WWW-Authenticate", "Bearer");
  exchange.respond(e.status(), kJson, e.to_json(), headers);
}

}  // namespace

void require_method(const HttpRequest& request, http::verb wanted, const std::string& path) {
  if (request.method() == wanted) return;
  if (wanted == http::verb::get && request.method() == http::verb::head) return;
  const std::string allow(http::to_string(wanted));
  throw api::ApiError(405,
                      fmt::format("{} is not allowed on {}; use {}",
                                  std::string(request.method_string()), path, allow),
                      {}, "method_not_allowed")
      .with_allow(allow);
}

const char* server_state_name(ServerState state) {
  switch (state) {
    case ServerState::kLoading:
      return "loading";
    case ServerState::kReady:
      return "ready";
    case ServerState::kDraining:
      return "draining";
  }
  return "unknown";
}

Router::Router(ApiKeys keys, ServeMetrics& metrics, RouterOptions options)
    : keys_(std::move(keys)),
      metrics_(metrics),
      options_(std::move(options)),
      cors_(options_.allowed_origins) {}

Router::~Router() {
  stop_workers();
}

void Router::attach(Engine& engine, ServedModel model) {
  engine_ = &engine;
  model_ = std::move(model);
  chat_ = std::make_unique<api::ChatPrompter>(engine.tokenizer(), model_.chat_template,
                                              model_.tool_call_parser);
  if (model_.file) {
    embedder_ = std::make_unique<Embedder>(model_.file, options_.pooling);
  }
  if (options_.compressor_file || model_.file) {
    compressor_ = std::make_unique<RequestCompressor>(
        options_.compressor_file ? options_.compressor_file : model_.file, model_.threads,
        model_.summary.parameters);
  }
  fim_ = llama::find_fim_tokens(
      model_.file && model_.file->format == "gguf" ? model_.file->path : "", engine.tokenizer());
  spdlog::info("chat prompts: {}; tool calls: {} format", chat_->description(),
               api::tool_call_format_name(chat_->tool_call_format()));
  metrics_.set_model_name(model_.id);
  set_state(ServerState::kReady);
}

void Router::handle(HttpRequest&& request, std::shared_ptr<HttpExchange> connection) {
  std::string path(request.target());
  if (const size_t query = path.find('?'); query != std::string::npos) path.resize(query);
  auto record = std::make_shared<RequestRecord>();
  record->start = Clock::now();
  const auto given_id = request["X-Request-Id"];
  record->id = !given_id.empty() && given_id.size() <= 128
                   ? std::string(given_id)
                   : fmt::format("req-{}", next_request_.fetch_add(1));
  record->client = connection->peer();
  record->method = std::string(request.method_string());
  record->path = path;
  // A dashboard polls its state every second: logged at debug, as scrapes are.
  record->quiet = path == "/health" || path == "/metrics" || path == "/dashboard/state";
  auto exchange = std::make_shared<LoggedExchange>(std::move(connection), record);
  exchange->add_header("X-Request-Id", record->id);
  const auto origin_field = request[http::field::origin];
  const std::string_view origin(origin_field.data(), origin_field.size());
  for (auto& [name, value] : cors_.response_headers(origin)) exchange->add_header(name, value);
  std::string label = "other";
  try {
    if (request.method() == http::verb::options && cors_.allows(origin)) {
      label = "preflight";
      exchange->respond(204, "text/plain", "", cors_.preflight_headers(origin));
      metrics_.observe_status(label, 204);
      return;
    }
    dispatch(request, path, exchange, label);
  } catch (...) {
    answer_failure(*exchange, std::string(request.method_string()) + " " + path, label,
                   std::current_exception());
  }
}

void Router::answer_failure(HttpExchange& exchange, const std::string& what,
                            const std::string& label, std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const api::ApiError& e) {
    if (e.status() >= 500) spdlog::warn("{}: {}", what, e.what());
    send_error(exchange, e);
    metrics_.observe_status(label, e.status());
  } catch (const Error& e) {
    const api::ApiError api_error = api::api_error_from(e);
    send_error(exchange, api_error);
    metrics_.observe_status(label, api_error.status());
  } catch (const std::exception& e) {
    spdlog::error("{}: {}", what, e.what());
    send_error(exchange, api::ApiError(500, e.what(), {}, "internal_error"));
    metrics_.observe_status(label, 500);
  }
}

void Router::dispatch(HttpRequest& request, const std::string& path,
                      const std::shared_ptr<LoggedExchange>& exchange, std::string& label) {
  if (path == "/") {
    label = "index";
    require_method(request, http::verb::get, path);
    exchange->respond(302, "text/plain; charset=utf-8", "see /dashboard\n",
                      {{"Location", "/dashboard"}});
    metrics_.observe_status(label, 302);
    return;
  }
  if (path == "/dashboard" || path.starts_with("/dashboard/")) {
    label = "dashboard";
    require_method(request, http::verb::get, path);
    dashboard(request, path, exchange);
    return;
  }
  if (path == "/health") {
    label = "health";
    require_method(request, http::verb::get, path);
    const ServerState s = state();
    const int status = s == ServerState::kReady ? 200 : 503;
    HeaderList headers;
    if (status == 503) headers.emplace_back("Retry-After", "5");
    exchange->respond(status, kJson, json{{"status", server_state_name(s)}}.dump(), headers);
    metrics_.observe_status(label, status);
    return;
  }
  if (path == "/metrics") {
    label = "metrics";
    require_method(request, http::verb::get, path);
    const ServerState s = state();
    std::string text;
    if (s != ServerState::kLoading) {
      const EngineStats stats = engine_->stats();
      text = metrics_.render(&stats, static_cast<int>(s));
    } else {
      text = metrics_.render(nullptr, static_cast<int>(s));
    }
    exchange->respond(200, kPrometheus, std::move(text));
    metrics_.observe_status(label, 200);
    return;
  }
  if (path == "/v1/messages" || path == "/v1/messages/count_tokens") {
    anthropic_messages(request, path, exchange, label);
    return;
  }
  if (llama_server_route(request, path, exchange, label)) return;
  const bool tokenizer_path = path == "/tokenize" || path == "/detokenize";
  if (path.starts_with("/v1/") || tokenizer_path) {
    require_api_key(request);
    if (tokenizer_path) {
      label = path.substr(1);
      require_method(request, http::verb::post, path);
      tokenizer_route(request, path, exchange);
      return;
    }
    if (path == "/v1/embeddings") {
      label = "embeddings";
      require_method(request, http::verb::post, path);
      embeddings(request, exchange);
      return;
    }
    if (path == "/v1/models" || path.starts_with("/v1/models/")) {
      label = "models";
      require_method(request, http::verb::get, path);
      list_models(path, exchange);
      metrics_.observe_status(label, 200);
      return;
    }
    if (path == "/v1/engine/state") {
      label = "engine_state";
      require_method(request, http::verb::get, path);
      engine_state(exchange);
      return;
    }
    if (const std::optional<api::Endpoint> endpoint = api::endpoint_for_path(path)) {
      label = api::endpoint_name(*endpoint);
      require_method(request, http::verb::post, path);
      generate(request, *endpoint, exchange, label);
      return;
    }
  }
  throw api::ApiError(
      404, fmt::format("there is no route {} {}", std::string(request.method_string()), path), {},
      "not_found");
}

void Router::require_api_key(const HttpRequest& request, bool allow_x_api_key) const {
  if (!keys_.enabled()) return;
  const auto authorization = request[http::field::authorization];
  const auto x_api_key = request["x-api-key"];
  const bool by_x_api_key =
      allow_x_api_key && !x_api_key.empty() &&
      keys_.accepts("Bearer " + std::string(x_api_key.data(), x_api_key.size()));
  if (!by_x_api_key &&
      !keys_.accepts(std::string_view(authorization.data(), authorization.size()))) {
    throw api::ApiError(401,
                        allow_x_api_key ? "missing or invalid API key: send 'x-api-key: <key>' or "
                                          "'Authorization: Bearer <key>'"
                                        : "missing or invalid API key: send 'Authorization: "
                                          "Bearer <key>'",
                        {}, "invalid_api_key");
  }
}

void Router::dashboard(const HttpRequest& request, const std::string& path,
                       const std::shared_ptr<HttpExchange>& exchange) {
  if (path != "/dashboard/state") {
    // The page and its scripts hold no data: open, so the page can ask for the key.
    const EmbeddedAsset* asset = find_dashboard_asset(path);
    if (!asset) {
      throw api::ApiError(404, fmt::format("there is no dashboard file {}", path), {}, "not_found");
    }
    exchange->respond(200, dashboard_content_type(asset->path), std::string(asset->body),
                      {{"Cache-Control", "no-cache"}});
    metrics_.observe_status("dashboard", 200);
    return;
  }
  // The state shows prompt text (near misses): behind the key, as /v1 is.
  require_api_key(request);
  // On a worker: the advisor's refresh (every few seconds) takes milliseconds.
  answer_json_from_worker(exchange, "GET /dashboard/state", "dashboard",
                          [this] { return api::dump_json(dashboard_snapshot()); },
                          {{"Cache-Control", "no-store"}});
}

void Router::answer_json_from_worker(const std::shared_ptr<HttpExchange>& exchange,
                                     std::string what, std::string label,
                                     std::function<std::string()> make_body, HeaderList headers,
                                     size_t body_bytes) {
  boost::asio::post(pool_for(body_bytes),
                    [this, exchange, what = std::move(what), label = std::move(label),
                     make_body = std::move(make_body), headers = std::move(headers)] {
                      std::string body;
                      std::exception_ptr failure;
                      try {
                        body = make_body();
                      } catch (...) {
                        failure = std::current_exception();
                      }
                      boost::asio::post(exchange->executor(), [this, exchange, what, label, headers,
                                                               failure, body = std::move(body)]() {
                        if (failure) {
                          answer_failure(*exchange, what, label, failure);
                        } else {
                          exchange->respond(200, kJson, body, headers);
                          metrics_.observe_status(label, 200);
                        }
                      });
                    });
}

nlohmann::json Router::dashboard_snapshot() {
  DashboardInputs in;
  in.now = Clock::now();
  in.time = seconds_between(started_, in.now);
  const ServerState s = state();
  in.state = server_state_name(s);
  if (s == ServerState::kLoading) {
    in.model = "loading";
    return dashboard_state(in);
  }
  in.model = model_.id;
  advice_.refresh(*engine_);
  const EngineStats stats = engine_->stats();
  in.engine = &stats;
  in.latency = metrics_.recent_latency(in.window);
  in.advice = advice_.latest();
  return dashboard_state(in);
}

void Router::require_ready_state() const {
  if (state() == ServerState::kLoading) {
    throw api::ApiError(503, "the model is still loading", {}, "loading").with_retry_after(5);
  }
}

void Router::tokenizer_route(HttpRequest& request, const std::string& path,
                             const std::shared_ptr<HttpExchange>& exchange) {
  require_ready_state();
  // On a worker, as generation requests are parsed: a body of --max-body (4 MiB by default)
  // takes seconds to tokenize, and every other connection of this io thread would wait.
  const bool tokenize = path == "/tokenize";
  const size_t body_bytes = request.body().size();
  answer_json_from_worker(
      exchange, "POST " + path, path.substr(1),
      [this, tokenize, body = std::make_shared<const std::string>(std::move(request.body()))] {
        const json parsed = api::parse_json_body(*body);
        return api::dump_json(tokenize ? tokenize_response(parsed, engine_->tokenizer(), *chat_,
                                                           engine_->max_context())
                                       : detokenize_response(parsed, engine_->tokenizer()));
      },
      {}, body_bytes);
}

void Router::embeddings(HttpRequest& request, const std::shared_ptr<LoggedExchange>& exchange) {
  require_ready_state();
  if (!embedder_) {
    throw api::ApiError(404, "this server does not compute embeddings", {}, "not_found");
  }
  // Set when the client disconnects: the job stops at its next pass (or is never queued).
  auto cancelled = std::make_shared<CancelFlag>(false);
  exchange->on_client_gone([this, cancelled] {
    cancelled->store(true);
    metrics_.observe_status("embeddings", 499);
  });
  boost::asio::thread_pool& pool = pool_for(request.body().size());
  boost::asio::post(pool, [this, exchange, cancelled, body = std::move(request.body())] {
    // On a worker: parsing and tokenizing cost time proportional to the body, and building
    // the model (the first request) seconds.
    try {
      const json parsed = api::parse_json_body(body);
      if (parsed.is_object() && parsed.contains("model") && parsed["model"].is_string() &&
          parsed["model"] != model_.id) {
        throw api::model_not_found(parsed["model"].get<std::string>());
      }
      const EmbeddingEncoding encoding = parse_embedding_encoding(parsed, engine_->config().dim);
      std::vector<std::vector<int32_t>> inputs =
          parse_embedding_inputs(parsed, engine_->tokenizer(), engine_->max_context());
      int64_t tokens = 0;
      for (const auto& input : inputs) tokens += static_cast<int64_t>(input.size());
      if (cancelled->load()) return;
      auto job = embedder_->job(
          std::move(inputs), engine_->options().max_batch_tokens, cancelled,
          [this, exchange, tokens, encoding](std::vector<std::vector<float>> vectors,
                                             std::exception_ptr error) {
            // On the engine thread: the response's JSON is written on a worker.
            if (error) {
              boost::asio::post(exchange->executor(), [this, exchange, error] {
                answer_failure(*exchange, "POST /v1/embeddings", "embeddings", error);
              });
              return;
            }
            answer_json_from_worker(
                exchange, "POST /v1/embeddings", "embeddings",
                [this, tokens, encoding,
                 vectors =
                     std::make_shared<const std::vector<std::vector<float>>>(std::move(vectors))] {
                  return api::dump_json(embeddings_response(*vectors, tokens, model_.id, encoding));
                });
          });
      boost::asio::post(exchange->executor(), [exchange, tokens] {
        exchange->record().prompt_tokens = tokens;  // the log line's, on its strand
      });
      engine_->run_between_steps(std::move(job));
    } catch (...) {
      boost::asio::post(exchange->executor(), [this, exchange, error = std::current_exception()] {
        answer_failure(*exchange, "POST /v1/embeddings", "embeddings", error);
      });
    }
  });
}

void Router::list_models(const std::string& path, const std::shared_ptr<HttpExchange>& exchange) {
  require_ready_state();
  const json model = {{"id", model_.id},
                      {"object", "model"},
                      {"created", model_.created},
                      {"owned_by", "rapide"},
                      {"description", model_.description},
                      {"max_model_len", engine_->max_context()},
                      {"parameters", model_.summary.parameters},
                      {"file_size", model_.summary.file_bytes},
                      {"weight_type", model_.summary.weight_type}};
  if (path == "/v1/models") {
    exchange->respond(200, kJson, api::dump_json(json{{"object", "list"}, {"data", {model}}}));
    return;
  }
  const std::string id = path.substr(std::string("/v1/models/").size());
  if (id != model_.id) {
    throw api::model_not_found(id);
  }
  exchange->respond(200, kJson, api::dump_json(model));
}

void Router::engine_state(const std::shared_ptr<HttpExchange>& exchange) {
  if (state() == ServerState::kLoading) {
    throw api::ApiError(503, "the model is still loading", {}, "loading").with_retry_after(5);
  }
  std::optional<double> bandwidth;
  bool start_probe = false;
  {
    std::lock_guard<std::mutex> lock(bandwidth_mutex_);
    bandwidth = read_bandwidth_;
    if (!bandwidth) {
      // The first request measures the read bandwidth, between engine steps; requests that
      // arrive meanwhile wait for the same figure.
      bandwidth_waiting_.push_back(exchange);
      start_probe = !bandwidth_probing_;
      bandwidth_probing_ = true;
    }
  }
  if (bandwidth) return answer_engine_state(exchange, *bandwidth);
  if (!start_probe) return;
  try {
    engine_->run_between_steps(advise::bandwidth_probe_task([this](double measured) {
      std::vector<std::shared_ptr<HttpExchange>> waiting;
      {
        std::lock_guard<std::mutex> lock(bandwidth_mutex_);
        if (measured > 0) read_bandwidth_ = measured;  // 0: the engine stopped first
        bandwidth_probing_ = false;
        waiting.swap(bandwidth_waiting_);
      }
      for (const auto& e : waiting) answer_engine_state(e, measured);
    }));
  } catch (const Error&) {  // the engine is stopping: answer without the figure
    std::vector<std::shared_ptr<HttpExchange>> waiting;
    {
      std::lock_guard<std::mutex> lock(bandwidth_mutex_);
      bandwidth_probing_ = false;
      waiting.swap(bandwidth_waiting_);
    }
    for (const auto& e : waiting) answer_engine_state(e, 0.0);
  }
}

void Router::answer_engine_state(const std::shared_ptr<HttpExchange>& exchange,
                                 double read_bandwidth) {
  // On a worker: the state of 256 steps and requests takes a while to write.
  answer_json_from_worker(exchange, "GET /v1/engine/state", "engine_state", [this, read_bandwidth] {
    advise::MachineFacts machine = advise::probe_machine(engine_->options().threads, false);
    machine.read_bandwidth = read_bandwidth;
    return api::dump_json(advise::state_to_json(advise::capture_engine_state(*engine_, machine)));
  });
}

std::optional<CompressionOutcome> Router::compress_prompt(nlohmann::json& body,
                                                          api::Endpoint endpoint) {
  if (!body.is_object()) return std::nullopt;  // parse_request answers that
  const std::optional<compress::CompressionRequest> request = read_compression_field(body);
  if (!request) return std::nullopt;
  if (!compressor_) {
    throw api::ApiError(400, "this server has no model file to score prompts with", "compression",
                        "unsupported");
  }
  // The engine's measured prefill cost per token (0 before its first prefill step).
  const StepKindTotals prefill = engine_->stats().step_totals.prefill_only;
  const double prefill_seconds_per_token =
      prefill.prefill_tokens > 0 ? prefill.seconds / static_cast<double>(prefill.prefill_tokens)
                                 : 0.0;
  return compressor_->compress_body(body, endpoint, *request, engine_->tokenizer(),
                                    prefill_seconds_per_token);
}

void Router::anthropic_messages(HttpRequest& request, const std::string& path,
                                const std::shared_ptr<LoggedExchange>& exchange,
                                std::string& label) {
  // Every answer, errors included, goes through the translating exchange.
  auto anthropic = std::make_shared<AnthropicExchange>(exchange);
  const bool count = path == "/v1/messages/count_tokens";
  label = count ? "messages.count_tokens" : "messages";
  try {
    require_api_key(request, /*allow_x_api_key=*/true);
    require_method(request, http::verb::post, path);
    if (!count) return generate(request, api::Endpoint::kChat, exchange, label, anthropic);
    require_ready_state();
    const size_t body_bytes = request.body().size();  // a large body goes to its own worker
    answer_json_from_worker(
        anthropic, "POST " + path, label,
        [this, body = std::make_shared<const std::string>(std::move(request.body()))] {
          const json chat = api::chat_body_from_anthropic(api::parse_json_body(*body), true);
          api::GenerationSpec spec = api::parse_chat_request(chat, engine_->tokenizer());
          api::check_front_end(spec, model_.id, api::FrontEnd::kServer);
          chat_->fill_prompt(spec);
          return api::dump_json(json{{"input_tokens", spec.prompts.at(0).size()}});
        },
        {}, body_bytes);
  } catch (...) {
    answer_failure(*anthropic, "POST " + path, label, std::current_exception());
  }
}

void Router::generate(HttpRequest& request, api::Endpoint endpoint,
                      const std::shared_ptr<LoggedExchange>& exchange, const std::string& label,
                      std::shared_ptr<AnthropicExchange> anthropic) {
  const ServerState s = state();
  if (s == ServerState::kLoading) {
    throw api::ApiError(503, "the model is still loading", {}, "loading").with_retry_after(5);
  }
  if (s == ServerState::kDraining) {
    throw api::ApiError(503, "the server is shutting down", {}, "draining").with_retry_after(5);
  }
  std::string what = std::string(request.method_string()) + " " + std::string(request.target());
  boost::asio::thread_pool& pool = pool_for(request.body().size());
  boost::asio::post(pool, [this, body = std::move(request.body()), endpoint, exchange, label,
                           anthropic, what = std::move(what)]() mutable {
    // On a worker: everything here costs time proportional to the body.
    std::exception_ptr failure;
    std::shared_ptr<api::GenerationSpec> spec;
    try {
      json parsed = api::parse_json_body(body);
      if (anthropic) parsed = api::chat_body_from_anthropic(parsed);
      if (options_.log_prompts) {
        const json* prompt = parsed.contains("messages") ? &parsed["messages"] : nullptr;
        if (!prompt && parsed.contains("prompt")) prompt = &parsed["prompt"];
        if (prompt) {
          exchange->record().prompt =
              prompt->is_string() ? prompt->get<std::string>() : api::dump_json(*prompt);
        }
      }
      const std::optional<CompressionOutcome> compression = compress_prompt(parsed, endpoint);
      spec = std::make_shared<api::GenerationSpec>(
          api::parse_request(parsed, endpoint, engine_->tokenizer()));
      api::check_front_end(*spec, model_.id, api::FrontEnd::kServer);
      chat_->fill_prompt(*spec);
      if (compression) {
        spec->compression_usage =
            compression->usage(static_cast<int64_t>(spec->prompts.at(0).size()));
      }
    } catch (...) {
      failure = std::current_exception();
    }
    boost::asio::post(
        exchange->executor(), [this, exchange, anthropic, label, what, spec, failure] {
          // Back on the connection's strand.
          const std::shared_ptr<HttpExchange> output =
              anthropic ? std::shared_ptr<HttpExchange>(anthropic) : exchange;
          try {
            if (failure) std::rethrow_exception(failure);
            if (anthropic)
              anthropic->set_input_tokens(static_cast<int64_t>(spec->prompts.at(0).size()));
            GenerationContext context;
            context.engine = engine_;
            context.metrics = &metrics_;
            context.model_id = model_.id;
            context.record = exchange->shared_record();
            GenerationJob::start(context, std::move(*spec), output);
          } catch (...) {
            answer_failure(*output, what, label, std::current_exception());
          }
        });
  });
}

}  // namespace rapide::serve
