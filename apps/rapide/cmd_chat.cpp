// `rapide chat`: a conversation in the terminal (chat_repl.h), with the model loaded in
// process (-m) or through a running server's /v1/chat/completions (--url).
#include <boost/asio/io_context.hpp>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "api/chat.h"
#include "apps/rapide/chat_repl.h"
#include "apps/rapide/commands.h"
#include "apps/rapide/engine_flags.h"
#include "apps/rapide/model_options.h"
#include "base/error.h"
#include "base/logging.h"
#include "engine/engine.h"
#include "loadgen/http_client.h"
#include "template/named_templates.h"

namespace rapide::cli {

namespace {

using nlohmann::json;

struct ChatOptions {
  ModelOptions model;
  EngineFlags engine;
  SamplingFlags sampling;
  std::string url;
  std::string api_key;
  std::string served_model;
  std::string chat_template;
  std::string system;
};

// Replies from an Engine in this process, prompts made by the model's chat template (or
// --chat-template's).
class EngineChat final : public ChatBackend {
 public:
  EngineChat(Engine& engine, const std::string& template_source)
      : engine_(engine), prompter_(engine.tokenizer(), template_source) {}

  ChatReplyStats reply(const json& messages, const SamplingParams& sampling,
                       const std::function<void(const std::string&)>& on_text,
                       std::string& reply) override {
    auto queue = std::make_shared<EventQueue>();
    Request request;
    request.prompt = prompter_.prompt_tokens(messages, json());
    request.sampling = sampling;
    request.sink = queue;
    engine_.submit(std::move(request));
    TokenEvent event;
    while (queue->pop(event)) {
      reply += event.text;
      on_text(event.text);
      if (event.finished) break;
    }
    if (event.finish_reason == FinishReason::kError) fail(ErrorCode::kInternal, "{}", event.error);
    ChatReplyStats stats;
    stats.prompt_tokens = event.prompt_tokens;
    stats.completion_tokens = event.completion_tokens;
    stats.ttft_seconds = event.metrics.ttft_seconds;
    stats.tpot_seconds = event.metrics.tpot_seconds;
    stats.finish_reason = finish_reason_name(event.finish_reason);
    return stats;
  }

 private:
  Engine& engine_;
  api::ChatPrompter prompter_;
};

// Replies streamed from a server's /v1/chat/completions (the bench HTTP client).
class HttpChat final : public ChatBackend {
 public:
  HttpChat(const ChatOptions& o) : target_(loadgen::parse_url(o.url)), options_(o) {}

  ChatReplyStats reply(const json& messages, const SamplingParams& sampling,
                       const std::function<void(const std::string&)>& on_text,
                       std::string& reply) override {
    json body = {{"messages", messages},
                 {"stream", true},
                 {"stream_options", {{"include_usage", true}}},
                 {"temperature", sampling.temperature},
                 {"top_p", sampling.top_p},
                 {"top_k", sampling.top_k},
                 {"min_p", sampling.min_p},
                 {"max_tokens", sampling.max_tokens},
                 {"seed", sampling.seed}};
    if (!options_.served_model.empty()) body["model"] = options_.served_model;
    loadgen::HttpPost post;
    post.path = "/v1/chat/completions";
    post.body = body.dump();
    post.api_key = options_.api_key;
    post.on_text = on_text;
    boost::asio::io_context io;
    loadgen::RequestRecord result;
    loadgen::post_streaming(io, target_, std::move(post), Clock::now(), loadgen::RequestRecord{},
                            [&result](loadgen::RequestRecord&& r) { result = std::move(r); });
    io.run();
    if (!result.ok()) fail(ErrorCode::kUnavailable, "{}: {}", options_.url, result.error_message);
    reply = result.output_text;
    ChatReplyStats stats;
    stats.prompt_tokens = result.prompt_tokens;
    stats.completion_tokens = result.output_tokens;
    stats.ttft_seconds = std::max(0.0, result.ttft());
    stats.tpot_seconds = std::max(0.0, result.tpot());
    stats.finish_reason = "done";
    return stats;
  }

 private:
  loadgen::HttpTarget target_;
  const ChatOptions& options_;
};

void chat_main(const ChatOptions& o) {
  if (o.url.empty() == o.model.model_path.empty()) {
    fail(ErrorCode::kInvalidArgument, "give exactly one of -m/--model and --url");
  }
  const SamplingParams sampling = o.sampling.resolve();
  if (!o.url.empty()) {
    if (!o.chat_template.empty()) {
      fail(ErrorCode::kInvalidArgument,
           "--chat-template applies to -m; the server at --url uses its own (rapide serve "
           "--chat-template)");
    }
    HttpChat backend(o);
    run_chat_repl(backend, sampling, o.system);
    return;
  }
  const std::string template_source =
      o.chat_template.empty() ? std::string() : resolve_chat_template(o.chat_template);
  LoadedModel loaded = load_for_inference(o.model);
  const EngineOptions engine_options = o.engine.resolve_for_one_sequence(loaded.pool->size());
  loaded.pool.reset();  // the engine builds its own pool
  Engine engine(*loaded.model, *loaded.tokenizer, engine_options);
  EngineChat backend(engine, template_source);
  run_chat_repl(backend, sampling, o.system);
}

}  // namespace

void register_chat(CLI::App& app) {
  auto o = std::make_shared<ChatOptions>();
  CLI::App* cmd = app.add_subcommand(
      "chat",
      "talk to a model in the terminal, through its chat template (-m) or a server (--url)");
  add_model_options(*cmd, o->model);
  cmd->get_option("--model")->required(false);
  cmd->add_option("--url", o->url, "a running server's root, http://HOST:PORT, instead of -m");
  cmd->add_option("--api-key", o->api_key, "with --url: sent as Authorization: Bearer KEY");
  cmd->add_option("--served-model-name", o->served_model, "with --url: the request's model");
  cmd->add_option("--chat-template", o->chat_template,
                  "chat template replacing the model's: a file, or a name (chatml, llama3, ...)");
  cmd->add_option("--system", o->system, "the conversation's first system message");
  add_sampling_flags(*cmd, o->sampling);
  add_engine_flags(*cmd, o->engine);
  add_jinja_flag(*cmd);
  cmd->callback([o] { chat_main(*o); });
}

}  // namespace rapide::cli
