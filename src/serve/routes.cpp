#include "serve/routes.h"

#include <boost/asio/post.hpp>
#include <boost/beast/http/field.hpp>
#include <boost/beast/http/verb.hpp>

#include "api/api_error.h"
#include "api/front_end.h"
#include "api/openai_protocol.h"
#include "api/openai_responses.h"
#include "base/error.h"
#include "base/logging.h"
#include "serve/generation.h"

namespace rapide::serve {

namespace http = boost::beast::http;
using nlohmann::json;

namespace {

constexpr const char* kJson = "application/json";
constexpr const char* kPrometheus = "text/plain; version=0.0.4; charset=utf-8";

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

void send_error(HttpExchange& exchange, const api::ApiError& e) {
  HeaderList headers;
  if (e.retry_after()) headers.emplace_back("Retry-After", std::to_string(*e.retry_after()));
  if (!e.allow().empty()) headers.emplace_back("Allow", e.allow());
  if (e.status() == 401) headers.emplace_back("WWW-Authenticate", "Bearer");
  exchange.respond(e.status(), kJson, e.to_json(), headers);
}

}  // namespace

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

Router::Router(ApiKeys keys, ServeMetrics& metrics) : keys_(std::move(keys)), metrics_(metrics) {}

Router::~Router() {
  stop_workers();
}

void Router::attach(Engine& engine, ServedModel model) {
  engine_ = &engine;
  model_ = std::move(model);
  chat_ = std::make_unique<api::ChatPrompter>(engine.tokenizer());
  spdlog::info("chat prompts: {}", chat_->description());
  set_state(ServerState::kReady);
}

void Router::handle(HttpRequest&& request, std::shared_ptr<HttpExchange> exchange) {
  std::string path(request.target());
  if (const size_t query = path.find('?'); query != std::string::npos) path.resize(query);
  std::string label = "other";
  try {
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
                      const std::shared_ptr<HttpExchange>& exchange, std::string& label) {
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
  if (path.starts_with("/v1/")) {
    const auto authorization = request[http::field::authorization];
    if (keys_.enabled() &&
        !keys_.accepts(std::string_view(authorization.data(), authorization.size()))) {
      throw api::ApiError(401, "missing or invalid API key: send 'Authorization: Bearer <key>'", {},
                          "invalid_api_key");
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
      metrics_.observe_status(label, 200);
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

void Router::list_models(const std::string& path, const std::shared_ptr<HttpExchange>& exchange) {
  if (state() == ServerState::kLoading) {
    throw api::ApiError(503, "the model is still loading", {}, "loading").with_retry_after(5);
  }
  const json model = {{"id", model_.id},
                      {"object", "model"},
                      {"created", model_.created},
                      {"owned_by", "rapide"},
                      {"description", model_.description},
                      {"max_model_len", engine_->max_context()}};
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
  // On a worker: the first request measures the read bandwidth (about a second), and the
  // state of 256 steps and requests takes a while to write.
  boost::asio::post(workers_, [this, exchange] {
    std::string body;
    std::exception_ptr failure;
    try {
      std::call_once(machine_once_, [this] {
        machine_ = advise::probe_machine(engine_->options().threads, true);
      });
      body =
          api::dump_json(advise::state_to_json(advise::capture_engine_state(*engine_, machine_)));
    } catch (...) {
      failure = std::current_exception();
    }
    boost::asio::post(exchange->executor(), [this, exchange, failure, body = std::move(body)]() {
      if (failure) {
        answer_failure(*exchange, "GET /v1/engine/state", "engine_state", failure);
      } else {
        exchange->respond(200, kJson, body);
      }
    });
  });
}

void Router::generate(HttpRequest& request, api::Endpoint endpoint,
                      const std::shared_ptr<HttpExchange>& exchange, const std::string& label) {
  const ServerState s = state();
  if (s == ServerState::kLoading) {
    throw api::ApiError(503, "the model is still loading", {}, "loading").with_retry_after(5);
  }
  if (s == ServerState::kDraining) {
    throw api::ApiError(503, "the server is shutting down", {}, "draining").with_retry_after(5);
  }
  std::string what = std::string(request.method_string()) + " " + std::string(request.target());
  boost::asio::post(workers_, [this, body = std::move(request.body()), endpoint, exchange, label,
                               what = std::move(what)]() mutable {
    // On a worker: everything here costs time proportional to the body.
    std::exception_ptr failure;
    std::shared_ptr<api::GenerationSpec> spec;
    try {
      const json parsed = api::parse_json_body(body);
      spec = std::make_shared<api::GenerationSpec>(
          api::parse_request(parsed, endpoint, engine_->tokenizer()));
      api::check_front_end(*spec, model_.id, api::FrontEnd::kServer);
      chat_->fill_prompt(*spec);
    } catch (...) {
      failure = std::current_exception();
    }
    boost::asio::post(exchange->executor(), [this, exchange, label, what, spec, failure] {
      // Back on the connection's strand.
      try {
        if (failure) std::rethrow_exception(failure);
        GenerationContext context;
        context.engine = engine_;
        context.metrics = &metrics_;
        context.model_id = model_.id;
        GenerationJob::start(context, std::move(*spec), exchange);
      } catch (...) {
        answer_failure(*exchange, what, label, std::current_exception());
      }
    });
  });
}

}  // namespace rapide::serve
