// The Router's llama-server paths (llama.cpp tools/server/README.md), behind the API key as
// /v1 is:
//
//   POST /completion, /completions   native completion (llama_server_api.h,
//   native_completion_job.h) POST /infill                     fill-in-the-middle with the
//   vocabulary's FIM tokens; a model
//                                    without them answers 400 naming the missing tokens
//   POST /apply-template             {"messages"} -> {"prompt": the chat template's text}
//   GET  /props                      default_generation_settings, total_slots, model_path,
//                                    chat_template, build_info, ... (POST: 405, read-only as
//                                    llama-server without --props)
//   GET  /slots                      one entry per sequence the engine can run at once
//                                    (?fail_on_no_slot=1: 503 when all are busy)
//   GET  /version                    rapide's release, commit and build type (llama-server has
//                                    no such route; it reports build_info in /props)
//   POST /rerank, /reranking, /v1/rerank, /v1/reranking
//                                    501: reranking needs a model with a rank head (llama-server's
//                                    --reranking / pooling rank); rapide's models have none
#include <algorithm>

#include <boost/asio/post.hpp>
#include <boost/beast/http/verb.hpp>

#include "api/api_error.h"
#include "api/front_end.h"
#include "api/openai_responses.h"
#include "serve/native_completion_job.h"
#include "serve/routes.h"

namespace rapide::serve {

namespace http = boost::beast::http;
using nlohmann::json;

namespace {

constexpr const char* kJson = "application/json";

bool query_flag(const HttpRequest& request, std::string_view name) {
  const std::string_view target(request.target().data(), request.target().size());
  const size_t q = target.find('?');
  if (q == std::string_view::npos) return false;
  const std::string wanted = std::string(name) + "=1";
  std::string_view query = target.substr(q + 1);
  while (!query.empty()) {
    const size_t amp = query.find('&');
    if (query.substr(0, amp) == wanted) return true;
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return false;
}

}  // namespace

int Router::total_slots() const {
  return engine_->options().max_seqs;
}

bool Router::llama_server_route(HttpRequest& request, const std::string& path,
                                const std::shared_ptr<LoggedExchange>& exchange,
                                std::string& label) {
  const bool completion = path == "/completion" || path == "/completions";
  const bool rerank =
      path == "/rerank" || path == "/reranking" || path == "/v1/rerank" || path == "/v1/reranking";
  if (!completion && !rerank && path != "/infill" && path != "/apply-template" &&
      path != "/props" && path != "/slots" && path != "/version") {
    return false;
  }
  require_api_key(request);
  if (completion || path == "/infill") {
    label = completion ? "completion" : "infill";
    require_method(request, http::verb::post, path);
    native_completion(request, path == "/infill", exchange, label);
    return true;
  }
  if (rerank) {
    label = "rerank";
    require_method(request, http::verb::post, path);
    throw api::ApiError(501,
                        "reranking needs a reranking model (a classifier head, llama-server's "
                        "--reranking / pooling type rank); the served model has none",
                        {}, "not_supported");
  }
  if (path == "/version") {
    label = "version";
    require_method(request, http::verb::get, path);
    exchange->respond(
        200, kJson,
        api::dump_json({{"version", model_.build.version},
                        {"commit", model_.build.commit},
                        {"build_type", model_.build.type},
                        {"build_info",
                         fmt::format("rapide-{}-{}", model_.build.version, model_.build.commit)}}));
    metrics_.observe_status(label, 200);
    return true;
  }
  require_ready_state();
  if (path == "/props") {
    label = "props";
    require_method(request, http::verb::get, path);
    exchange->respond(200, kJson, api::dump_json(props_json()));
    metrics_.observe_status(label, 200);
    return true;
  }
  if (path == "/slots") {
    label = "slots";
    require_method(request, http::verb::get, path);
    json slots = slots_json();
    if (query_flag(request, "fail_on_no_slot")) {
      const bool idle = std::any_of(slots.begin(), slots.end(),
                                    [](const json& s) { return !s["is_processing"].get<bool>(); });
      if (!idle) throw api::ApiError(503, "no slot available", {}, "unavailable");
    }
    exchange->respond(200, kJson, api::dump_json(slots));
    metrics_.observe_status(label, 200);
    return true;
  }
  // POST /apply-template: the chat request's checks, then the template's text.
  label = "apply_template";
  require_method(request, http::verb::post, path);
  const size_t body_bytes = request.body().size();
  answer_json_from_worker(
      exchange, "POST " + path, label,
      [this, body = std::make_shared<const std::string>(std::move(request.body()))] {
        const json parsed = api::parse_json_body(*body);
        const api::GenerationSpec spec = api::parse_chat_request(parsed, engine_->tokenizer());
        return api::dump_json({{"prompt", chat_->render(spec.messages, spec.tools)}});
      },
      {}, body_bytes);
  return true;
}

json Router::props_json() const {
  json settings = {{"id", 0},
                   {"id_task", -1},
                   {"n_ctx", engine_->max_context()},
                   {"speculative", engine_->stats().spec_enabled},
                   {"is_processing", false},
                   {"params", llama::default_params_json()},
                   {"prompt", ""},
                   {"next_token",
                    {{"has_next_token", true},
                     {"has_new_line", false},
                     {"n_remain", -1},
                     {"n_decoded", 0},
                     {"stopping_word", ""}}}};
  const std::string& model_template = engine_->tokenizer().data().chat_template;
  return {{"default_generation_settings", std::move(settings)},
          {"total_slots", total_slots()},
          {"model_alias", model_.id},
          {"model_path", model_.file ? model_.file->path : model_.description},
          {"chat_template", model_.chat_template.empty() ? model_template : model_.chat_template},
          {"chat_template_caps", json::object()},
          {"modalities", {{"vision", false}, {"audio", false}}},
          {"build_info", fmt::format("rapide-{}-{}", model_.build.version, model_.build.commit)},
          {"is_sleeping", false},
          {"infill", fim_.usable()}};
}

json Router::slots_json() const {
  // The engine schedules sequences, not fixed slots: a "slot" is one of the max_seqs
  // sequences it runs at once; the busy ones, in scheduling order, show their request's
  // counts (id_task = the engine's request id, prompt and generated tokens), never its text.
  const EngineStats stats = engine_->stats();
  const int total = total_slots();
  json slots = json::array();
  for (int i = 0; i < total; ++i) {
    const RunningSequence* s = static_cast<size_t>(i) < stats.running_sequences.size()
                                   ? &stats.running_sequences[static_cast<size_t>(i)]
                                   : nullptr;
    const bool busy = s != nullptr;
    slots.push_back({{"id", i},
                     {"id_task", busy ? static_cast<int64_t>(s->request_id) : -1},
                     {"n_ctx", engine_->max_context()},
                     {"n_prompt_tokens", busy ? s->prompt_tokens : 0},
                     {"speculative", stats.spec_enabled},
                     {"is_processing", busy},
                     {"params", llama::default_params_json()},
                     {"next_token",
                      {{"has_next_token", busy},
                       {"has_new_line", false},
                       {"n_remain", busy ? s->max_generated - s->generated : -1},
                       {"n_decoded", busy ? s->generated : 0}}}});
  }
  return slots;
}

void Router::native_completion(HttpRequest& request, bool infill,
                               const std::shared_ptr<LoggedExchange>& exchange,
                               const std::string& label) {
  const ServerState s = state();
  if (s == ServerState::kLoading) {
    throw api::ApiError(503, "the model is still loading", {}, "loading").with_retry_after(5);
  }
  if (s == ServerState::kDraining) {
    throw api::ApiError(503, "the server is shutting down", {}, "draining").with_retry_after(5);
  }
  std::string what = std::string(request.method_string()) + " " + std::string(request.target());
  boost::asio::thread_pool& pool = pool_for(request.body().size());
  boost::asio::post(pool, [this, body = std::move(request.body()), infill, exchange, label,
                           what = std::move(what)]() mutable {
    // On a worker: parsing and tokenizing cost time proportional to the body.
    std::exception_ptr failure;
    std::shared_ptr<llama::NativeCompletion> parsed_request;
    try {
      const json parsed = api::parse_json_body(body);
      const Tokenizer& tokenizer = engine_->tokenizer();
      std::vector<int32_t> fim_prompt;
      if (infill) fim_prompt = llama::infill_prompt(parsed, tokenizer, fim_);
      parsed_request = std::make_shared<llama::NativeCompletion>(
          llama::parse_native_completion(parsed, tokenizer, total_slots(), engine_->max_context(),
                                         infill ? &fim_prompt : nullptr));
      if (options_.log_prompts && parsed.contains("prompt") && parsed["prompt"].is_string()) {
        exchange->record().prompt = parsed["prompt"].get<std::string>();
      }
    } catch (...) {
      failure = std::current_exception();
    }
    boost::asio::post(exchange->executor(), [this, exchange, label, what, parsed_request, failure] {
      try {
        if (failure) std::rethrow_exception(failure);
        NativeJobContext context;
        context.engine = engine_;
        context.metrics = &metrics_;
        context.model_id = model_.id;
        context.label = label;
        context.record = exchange->shared_record();
        NativeCompletionJob::start(context, std::move(*parsed_request), exchange);
      } catch (...) {
        answer_failure(*exchange, what, label, std::current_exception());
      }
    });
  });
}

}  // namespace rapide::serve
