#include "serve/routes.h"

#include <boost/beast/http/field.hpp>
#include <boost/beast/http/verb.hpp>

#include "base/error.h"
#include "base/logging.h"
#include "serve/api_error.h"
#include "serve/generation.h"
#include "serve/openai_protocol.h"
#include "serve/openai_responses.h"

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
  throw ApiError(405,
                 fmt::format("{} is not allowed on {}; use {}",
                             std::string(request.method_string()), path, allow),
                 {}, "method_not_allowed")
      .with_allow(allow);
}

void send_error(HttpExchange& exchange, const ApiError& e) {
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

Router::~Router() = default;

void Router::attach(Engine& engine, ServedModel model) {
  engine_ = &engine;
  model_ = std::move(model);
  chat_ = std::make_unique<ChatPrompter>(engine.tokenizer());
  spdlog::info("chat prompts: {}", chat_->description());
  set_state(ServerState::kReady);
}

void Router::handle(HttpRequest&& request, std::shared_ptr<HttpExchange> exchange) {
  std::string path(request.target());
  if (const size_t query = path.find('?'); query != std::string::npos) path.resize(query);
  std::string label = "other";
  try {
    dispatch(request, path, exchange, label);
    return;
  } catch (const ApiError& e) {
    if (e.status() >= 500)
      spdlog::warn("{} {}: {}", std::string(request.method_string()), path, e.what());
    send_error(*exchange, e);
    metrics_.observe_status(label, e.status());
  } catch (const Error& e) {
    const ApiError api = api_error_from(e);
    send_error(*exchange, api);
    metrics_.observe_status(label, api.status());
  } catch (const std::exception& e) {
    spdlog::error("{} {}: {}", std::string(request.method_string()), path, e.what());
    send_error(*exchange, ApiError(500, e.what(), {}, "internal_error"));
    metrics_.observe_status(label, 500);
  }
}

void Router::dispatch(const HttpRequest& request, const std::string& path,
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
      throw ApiError(401, "missing or invalid API key: send 'Authorization: Bearer <key>'", {},
                     "invalid_api_key");
    }
    if (path == "/v1/models" || path.starts_with("/v1/models/")) {
      label = "models";
      require_method(request, http::verb::get, path);
      list_models(path, exchange);
      metrics_.observe_status(label, 200);
      return;
    }
    if (path == "/v1/completions" || path == "/v1/chat/completions") {
      const bool chat = path == "/v1/chat/completions";
      label = chat ? "chat.completions" : "completions";
      require_method(request, http::verb::post, path);
      generate(request, chat, exchange);
      return;
    }
  }
  throw ApiError(404,
                 fmt::format("there is no route {} {}", std::string(request.method_string()), path),
                 {}, "not_found");
}

void Router::list_models(const std::string& path, const std::shared_ptr<HttpExchange>& exchange) {
  if (state() == ServerState::kLoading) {
    throw ApiError(503, "the model is still loading", {}, "loading").with_retry_after(5);
  }
  const json model = {{"id", model_.id},
                      {"object", "model"},
                      {"created", model_.created},
                      {"owned_by", "rapide"},
                      {"description", model_.description},
                      {"max_model_len", engine_->max_context()}};
  if (path == "/v1/models") {
    exchange->respond(200, kJson, dump_json(json{{"object", "list"}, {"data", {model}}}));
    return;
  }
  const std::string id = path.substr(std::string("/v1/models/").size());
  if (id != model_.id) {
    throw ApiError(404, fmt::format("the model '{}' does not exist", id), "model",
                   "model_not_found");
  }
  exchange->respond(200, kJson, dump_json(model));
}

void Router::generate(const HttpRequest& request, bool chat,
                      const std::shared_ptr<HttpExchange>& exchange) {
  const ServerState s = state();
  if (s == ServerState::kLoading) {
    throw ApiError(503, "the model is still loading", {}, "loading").with_retry_after(5);
  }
  if (s == ServerState::kDraining) {
    throw ApiError(503, "the server is shutting down", {}, "draining").with_retry_after(5);
  }
  const json body = parse_json_body(request.body());
  const Tokenizer& tokenizer = engine_->tokenizer();
  GenerationSpec spec =
      chat ? parse_chat_request(body, tokenizer) : parse_completion_request(body, tokenizer);
  if (!spec.model.empty() && spec.model != model_.id) {
    throw ApiError(404,
                   fmt::format("the model '{}' does not exist; this server serves '{}'", spec.model,
                               model_.id),
                   "model", "model_not_found");
  }
  if (chat) spec.prompts = {chat_->prompt_tokens(spec.messages, spec.tools)};
  GenerationContext context;
  context.engine = engine_;
  context.metrics = &metrics_;
  context.model_id = model_.id;
  GenerationJob::start(context, std::move(spec), exchange);
}

}  // namespace rapide::serve
