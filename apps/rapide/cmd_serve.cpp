// `rapide serve`: the OpenAI-compatible HTTP server (see src/serve/server.h).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>

#include <fmt/ranges.h>

#include "apps/rapide/commands.h"
#include "apps/rapide/engine_flags.h"
#include "apps/rapide/model_options.h"
#include "apps/rapide/version.h"
#include "base/cpu_features.h"
#include "base/error.h"
#include "base/logging.h"
#include "distributed/disaggregation.h"
#include "distributed/parallel_job.h"
#include "engine/engine.h"
#include "formats/model_summary.h"
#include "serve/demo_model.h"
#include "serve/server.h"
#include "template/named_templates.h"

namespace rapide::cli {

namespace {

struct ServeOptions {
  ModelOptions model;
  EngineFlags engine;
  serve::ServerOptions server;
  std::string served_model_name;
  std::string chat_template;
  LogSettings log;
  std::string pooling = "last";
  std::string tool_call_parser;
  std::string compressor_model;
  double drain_timeout_s = 30.0;
  int header_timeout_s = 10;
  uint64_t demo_seed = 1;
  // Prefill/decode disaggregation (distributed/disaggregation.h): on with --disaggregate or any
  // --role but auto.
  bool disaggregate = false;
  std::string role = "auto";
  int disagg_timeout_ms = 30000;
  int disagg_min_prompt = 0;
};

// CLI11 reads an environment variable that is set but empty as if it were unset, and an empty
// --api-key-file means no file: either started an open server for an operator who wrote
// RAPIDE_API_KEY="$UNSET" (or --api-key-file "$UNSET") believing it protected. They are
// refused like `--api-key ""` (serve/auth.h): a usage error, exit 2.
void refuse_empty_auth_options(const CLI::App& cmd) {
  for (const char* name : {"--api-key", "--api-key-file"}) {
    const CLI::Option* option = cmd.get_option(name);
    const std::string& env = option->get_envname();
    // Not given at all (neither flag nor config file), yet its variable exists: it is empty.
    if (option->count() == 0 && !env.empty() && std::getenv(env.c_str()) != nullptr) {
      fail(ErrorCode::kInvalidArgument,
           "{} is empty ({} is set to \"\"); pass a non-empty value, or unset {} to serve "
           "without one",
           name, env, env);
    }
  }
  const CLI::Option* key_file = cmd.get_option("--api-key-file");
  if (key_file->count() > 0 && key_file->as<std::string>().empty()) {
    fail(ErrorCode::kInvalidArgument,
         "--api-key-file is empty; pass a file of keys, or no --api-key-file to serve without "
         "one");
  }
}

// --disaggregate's checks, then this rank's role; nullopt when not disaggregated.
std::optional<DisaggRole> disaggregation_role(const ServeOptions& o) {
  if (!o.disaggregate && o.role == "auto") return std::nullopt;
  if (o.model.tp > 1 || o.model.pp > 1) {
    fail(ErrorCode::kInvalidArgument,
         "--disaggregate (or --role) cannot be combined with --tp / --pp: run one or the other");
  }
  if (o.engine.prefix_cache != "on") {
    fail(ErrorCode::kInvalidArgument,
         "--disaggregate needs --prefix-cache on: the decode rank adopts the prefill rank's KV "
         "blocks into its prefix cache");
  }
  return join_disaggregated_job(o.role);
}

LoadedModel load_demo_model(const ModelOptions& options, uint64_t seed) {
  LoadedModel loaded;
  loaded.file = std::make_shared<const ModelFile>(serve::make_demo_model(seed));
  loaded.model = std::make_unique<Model>(loaded.file);
  loaded.tokenizer = Tokenizer::create(loaded.file->tokenizer);
  const ModelConfig& c = loaded.model->config();
  spdlog::warn(
      "no --model given: serving the built-in DEMO model '{}' (random weights, {} "
      "layers, dim {}, vocab {}); its output is meaningless",
      serve::kDemoModelId, c.n_layers, c.dim, c.vocab_size);
  if (options.mlock) lock_model_in_ram();
  return loaded;
}

// The model's file (or an HF model's folder) name, without the directories above it.
std::filesystem::path model_file_name(const std::string& model_path) {
  std::filesystem::path path(model_path);
  if (path.filename().empty()) path = path.parent_path();  // "folder/" of an HF model
  return path.filename();
}

std::string model_id_for(const ServeOptions& o) {
  if (!o.served_model_name.empty()) return o.served_model_name;
  if (o.model.model_path.empty()) return serve::kDemoModelId;
  return model_file_name(o.model.model_path).stem().string();
}

void serve(ServeOptions& o, std::optional<DisaggRole> role);

void serve_main(ServeOptions& o) {
  configure_logging(o.log);
  const std::optional<DisaggRole> role = disaggregation_role(o);  // refusals first
  if (!role) return serve(o, role);
  try {
    serve(o, role);
  } catch (const std::exception& e) {
    abort_disaggregated_job(e);
  }
}

void serve(ServeOptions& o, std::optional<DisaggRole> role) {
  // Before anything loads: a wrong --chat-template fails in a second, not after the model.
  const std::string chat_template =
      o.chat_template.empty() ? std::string() : resolve_chat_template(o.chat_template);
  o.server.router.pooling = serve::parse_pooling(o.pooling);
  o.server.drain_timeout =
      std::chrono::milliseconds(static_cast<int64_t>(o.drain_timeout_s * 1000.0));
  o.server.http.header_timeout = std::chrono::seconds(o.header_timeout_s);
  if (is_follower_rank(o.model)) load_for_inference(o.model);  // rank 0's passes, then exit
  const bool demo = o.model.model_path.empty();
  const int threads = o.model.threads > 0 ? o.model.threads : physical_core_count();
  if (role == DisaggRole::kPrefill) {  // no HTTP: compute rank 0's prompts until it stops
    LoadedModel loaded = demo ? load_demo_model(o.model, o.demo_seed) : load_for_inference(o.model);
    loaded.pool.reset();
    serve_prefill_rank(*loaded.model, o.engine.resolve(threads));
    return;
  }
  if (!o.compressor_model.empty()) {
    o.server.router.compressor_file =
        std::make_shared<const ModelFile>(load_model(o.compressor_model));
  }
  serve::Server server(o.server);
  server.start();  // /health says "loading" while the model loads

  LoadedModel loaded = demo ? load_demo_model(o.model, o.demo_seed) : load_for_inference(o.model);
  loaded.pool.reset();  // the engine builds its own pool
  const auto draft = load_draft_model(o.engine.draft_model);
  // Declared before the engine, which uses it until it is destroyed.
  const std::unique_ptr<RemotePrefill> prefill_rank = role ? connect_prefill_ranks() : nullptr;
  Engine engine(*loaded.model, *loaded.tokenizer, o.engine.resolve(threads),
                draft ? draft->ref.get() : nullptr);
  if (prefill_rank) {
    engine.set_remote_prefill(prefill_rank.get(), std::chrono::milliseconds(o.disagg_timeout_ms),
                              o.disagg_min_prompt);
    spdlog::info(
        "disaggregated: rank 0 routes and decodes, {} prefill rank{} compute prompts' K/V "
        "(timeout {} ms)",
        parallel_job_size() - 1, parallel_job_size() > 2 ? "s" : "", o.disagg_timeout_ms);
  }

  serve::ServedModel served;
  served.id = model_id_for(o);
  // The file's name, not its path: clients need not learn the server's directory layout.
  served.tool_call_parser = o.tool_call_parser;
  served.description = demo ? serve::kDemoModelDescription
                            : fmt::format("{} ({})", model_file_name(o.model.model_path).string(),
                                          loaded.file->format);
  served.summary = summarize_model(*loaded.file);
  served.file = loaded.file;
  served.threads = threads;
  served.chat_template = chat_template;
  served.build = {cli::version_number(), cli::build_commit(), cli::build_type()};
  served.created = std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  server.attach(engine, served);
  spdlog::info("serving '{}'{} on http://{}:{}/v1", served.id,
               demo ? " [demo, random weights]" : "", o.server.http.host, server.port());
  const bool drained = server.wait();
  spdlog::info("stopped{}", drained ? "" : " (some requests were aborted at the drain timeout)");
}

}  // namespace

void register_serve(CLI::App& app) {
  auto o = std::make_shared<ServeOptions>();
  CLI::App* cmd = app.add_subcommand(
      "serve", "OpenAI-compatible HTTP server (a built-in demo model when no --model is given)");
  add_model_options(*cmd, o->model);
  cmd->get_option("--model")->required(false);
  serve::HttpServerOptions& http = o->server.http;
  cmd->add_option("--host", http.host, "address to listen on (0.0.0.0 for every interface)")
      ->capture_default_str();
  cmd->add_option("--port", http.port, "TCP port (0 = any free port, logged at start)")
      ->capture_default_str();
  cmd->add_option("--api-key", o->server.api_keys,
                  "require 'Authorization: Bearer KEY' on /v1 (repeatable)");
  cmd->add_option("--api-key-file", o->server.api_key_file, "file with one API key per line");
  cmd->add_option("--max-body", http.max_body, "largest request body in bytes (413 above)")
      ->transform(CLI::AsSizeValue(false))
      ->capture_default_str();
  cmd->add_option("--drain-timeout", o->drain_timeout_s,
                  "seconds SIGTERM waits for running requests before aborting them")
      ->check(CLI::Range(0.0, 86400.0))
      ->capture_default_str();
  cmd->add_option("--http-threads", o->server.io_threads, "threads running the HTTP event loop")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  cmd->add_option("--max-connections", http.max_connections,
                  "open connections at most; the oldest idle one is closed to admit a new one "
                  "(0 = as many as the descriptor limit allows)")
      ->capture_default_str();
  cmd->add_option("--header-timeout", o->header_timeout_s,
                  "seconds a new connection has to send its request head")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  cmd->add_option("--max-pending-bytes", http.max_pending_bytes,
                  "unread stream bytes per connection before the request is aborted")
      ->transform(CLI::AsSizeValue(false))
      ->capture_default_str();
  cmd->add_option("--served-model-name", o->served_model_name,
                  "model id in the API (default: the model file's name)");
  cmd->add_option("--tool-call-parser", o->tool_call_parser,
                  "format of the model's tool calls: hermes, llama3, mistral or json "
                  "(default: from the chat template)")
      ->check(CLI::IsMember({"hermes", "llama3", "mistral", "json"}));
  cmd->add_option("--demo-seed", o->demo_seed, "weights seed of the built-in demo model")
      ->capture_default_str();
  cmd->add_option("--chat-template", o->chat_template,
                  "chat template replacing the model's: a file, or a name (" +
                      fmt::format("{}", fmt::join(chat_template_names(), ", ")) + ")");
  cmd->add_option("--allowed-origins", o->server.router.allowed_origins,
                  "CORS: origins whose web pages may call the API, or * (repeatable; default "
                  "none)");
  cmd->add_option("--compressor-model", o->compressor_model,
                  "model that scores prompts for the \"compression\" field (default: the "
                  "served model; a smaller one makes compression pay)");
  cmd->add_option("--pooling", o->pooling,
                  "/v1/embeddings: last (the last token's hidden state) | mean (all tokens')")
      ->capture_default_str();
  cmd->add_option("--log-format", o->log.format, "text | json")->capture_default_str();
  cmd->add_option("--log-file", o->log.file, "append the log to this file instead of stderr");
  cmd->add_option("--log-level", o->log.level,
                  "trace | debug | info | warn | error | off (default: RAPIDE_LOG, else info)");
  cmd->add_flag("--log-prompts", o->server.router.log_prompts,
                "put prompt text in the request log lines (off: prompts may be private)");
  cmd->add_option("--log-stats-interval", o->server.log_stats_interval_s,
                  "seconds between the engine lines logged while busy (0 = none)")
      ->check(CLI::Range(0.0, 86400.0))
      ->capture_default_str();
  cmd->add_flag(
      "--disaggregate", o->disaggregate,
      "prefill/decode disaggregation (rapide-mpi under mpirun -np N+1): rank 0 serves HTTP and "
      "decodes, ranks 1..N compute the prompts' KV (each prompt to the least loaded) "
      "and send it to rank 0");
  cmd->add_option("--role", o->role,
                  "this rank's part with --disaggregate: auto (rank 0 router + decode, the "
                  "others prefill), router or decode (rank 0), prefill (ranks 1..N); any but auto "
                  "turns --disaggregate on")
      ->check(CLI::IsMember({"auto", "prefill", "decode", "router"}))
      ->capture_default_str();
  cmd->add_option("--disagg-timeout-ms", o->disagg_timeout_ms,
                  "milliseconds a request waits for its prompt's KV from the prefill rank "
                  "before it fails with 503")
      ->check(CLI::Range(1, 86400000))
      ->capture_default_str();
  cmd->add_option("--disagg-min-prompt", o->disagg_min_prompt,
                  "with --disaggregate, prompts of fewer tokens are computed on the decode "
                  "rank (0: every prompt with a full KV block goes to the prefill rank)")
      ->check(CLI::Range(0, 1 << 30))
      ->capture_default_str();
  add_engine_flags(*cmd, o->engine);
  add_jinja_flag(*cmd);
  cmd->callback([o, cmd] {
    refuse_empty_auth_options(*cmd);
    serve_main(*o);
  });
}

}  // namespace rapide::cli
