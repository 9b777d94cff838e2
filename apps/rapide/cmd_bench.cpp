// `rapide bench`: load an OpenAI-compatible server (or the in-process engine) with a chosen
// workload and arrival pattern, and report TTFT, TPOT, ITL, E2E, throughput and goodput.
// `rapide bench compare A.json B.json` puts two results side by side.
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "advise/advice_html.h"
#include "advise/advisor.h"
#include "advise/engine_state.h"
#include "api/api_error.h"
#include "api/structured_output.h"
#include "apps/rapide/bench_command.h"
#include "apps/rapide/commands.h"
#include "apps/rapide/engine_flags.h"
#include "apps/rapide/model_options.h"
#include "base/error.h"
#include "base/logging.h"
#include "base/mapped_file.h"
#include "engine/engine.h"
#include "loadgen/bench_report.h"
#include "loadgen/compare.h"
#include "loadgen/engine_backend.h"
#include "loadgen/html_report.h"
#include "loadgen/http_backend.h"
#include "loadgen/progress.h"
#include "loadgen/table_report.h"

namespace rapide::cli {

namespace {

// What speculation did during one run (the difference of two engine snapshots), for the
// report's settings (terminal, JSON and HTML).
std::string describe_speculation(const SpecStats& before, const SpecStats& after) {
  const uint64_t proposed = after.proposed - before.proposed;
  const uint64_t accepted = after.accepted - before.accepted;
  const uint64_t verifications = after.verifications - before.verifications;
  return fmt::format(
      "{} guesses verified, {} accepted ({:.1f} %), {:.2f} accepted per verification, "
      "auto off {} times, last k {}",
      proposed, accepted, proposed ? 100.0 * accepted / proposed : 0.0,
      verifications ? static_cast<double>(accepted) / verifications : 0.0,
      after.off_decisions - before.off_decisions, after.last_k);
}

using namespace rapide::loadgen;

std::vector<ArrivalPattern> arrival_patterns(const BenchOptions& o) {
  std::vector<ArrivalPattern> out;
  if (!o.rates.empty()) {
    for (const double rate : parse_rates(o.rates)) {
      out.push_back({o.max_concurrency, rate, o.burstiness, o.seed});
    }
    return out;
  }
  // Closed loop: one run per concurrency in the list.
  for (const double users : parse_rates(o.concurrency)) {
    if (std::isinf(users) || users != std::floor(users)) {
      fail(ErrorCode::kInvalidArgument, "--concurrency takes whole numbers, got {}", users);
    }
    out.push_back({static_cast<int>(users), 0.0, 1.0, o.seed});
  }
  return out;
}

WorkloadOptions workload_options(const BenchOptions& o) {
  WorkloadOptions w;
  w.kind = parse_workload_kind(o.workload);
  w.num_requests = o.num_requests;
  if (!o.input_len.empty()) w.input_len = LengthDist::parse(o.input_len);
  if (!o.output_len.empty()) w.output_len = LengthDist::parse(o.output_len);
  w.prefix_len = o.prefix_len;
  w.num_prefixes = o.num_prefixes;
  w.context_len = o.context_len;
  w.num_docs = o.num_docs;
  w.turns = o.turns;
  w.dataset = o.dataset;
  w.seed = o.seed;
  w.sizes_given = o.sizes_given;
  if (w.kind == WorkloadKind::kJsonl && w.dataset.empty()) {
    fail(ErrorCode::kInvalidArgument, "--workload jsonl needs --dataset FILE");
  }
  return w;
}

// What GET /v1/models says of the served model: its id, so the "model" field matches what the
// server expects without the user looking it up, and its context (vLLM's and rapide's
// max_model_len; 0 when absent), so the default workload fits it.
struct ServedModelInfo {
  std::string id = "default";
  int max_model_len = 0;
};

ServedModelInfo discover_model(const HttpTarget& target, const std::string& api_key) {
  ServedModelInfo info;
  const auto reply = http_get(target, "/v1/models", api_key, std::chrono::seconds(5));
  if (!reply) {
    spdlog::warn("{}:{} does not answer GET /v1/models; requests will report why", target.host,
                 target.port);
    return info;
  }
  const nlohmann::json j = nlohmann::json::parse(reply->body, nullptr, false);
  if (reply->status == 200 && j.is_object() && j.contains("data") && j["data"].is_array() &&
      !j["data"].empty() && j["data"][0].contains("id") && j["data"][0]["id"].is_string()) {
    const nlohmann::json& model = j["data"][0];
    info.id = model["id"].get<std::string>();
    if (model.contains("max_model_len") && model["max_model_len"].is_number_integer()) {
      info.max_model_len = model["max_model_len"].get<int>();
    }
    return info;
  }
  spdlog::warn("GET /v1/models gave HTTP {} without a model id; sending model \"default\"",
               reply->status);
  return info;
}

// Exits non-zero (after the report is out) when every request failed, or more than
// --max-error-rate of them: a benchmark of errors must not pass for a result.
void check_error_rate(const BenchReport& report, double max_error_rate) {
  size_t total = 0, failed = 0;
  std::string example;
  for (const RunResult& run : report.runs) {
    for (const RequestRecord& r : run.records) {
      ++total;
      if (r.ok()) continue;
      ++failed;
      if (example.empty()) example = r.error_message;
    }
  }
  if (total == 0 || failed == 0) return;
  const double rate = static_cast<double>(failed) / total;
  if (failed == total || (max_error_rate >= 0 && rate > max_error_rate)) {
    fail(ErrorCode::kUnavailable, "{} of {} requests failed ({:.1f} %{}), e.g.: {}", failed, total,
         100.0 * rate,
         max_error_rate >= 0 ? fmt::format(", above --max-error-rate {}", max_error_rate) : "",
         example);
  }
}

}  // namespace

BenchOutcome run_bench(BenchOptions& o) {
  const Slo slo = parse_slo(o.slo);
  const std::vector<ArrivalPattern> patterns = arrival_patterns(o);
  WorkloadOptions workload = workload_options(o);
  if (o.engine && o.model.model_path.empty()) {
    fail(ErrorCode::kInvalidArgument, "--engine needs -m/--model");
  }

  // The model's tokenizer, when a model is given, makes synthetic prompt lengths exact.
  LoadedModel loaded;
  std::unique_ptr<Tokenizer> tokenizer_only;
  const Tokenizer* tokenizer = nullptr;
  if (o.engine) {
    loaded = load_for_inference(o.model);
    tokenizer = loaded.tokenizer.get();
  } else if (!o.model.model_path.empty()) {
    LoadOptions load_options;
    load_options.tokenizer_path = o.model.tokenizer_path;
    tokenizer_only = Tokenizer::create(load_model(o.model.model_path, load_options).tokenizer);
    tokenizer = tokenizer_only.get();
  }
  TokenCounter counter;
  if (tokenizer) {
    counter = [tokenizer](const std::string& text) {
      return tokenizer->encode(text, false).size();
    };
  }

  // Every request asks for this structured output (the cost of constraints).
  nlohmann::json response_format;
  if (!o.response_format.empty()) {
    std::string text = o.response_format;
    if (text.starts_with("@")) text = read_text_file(text.substr(1));
    response_format = nlohmann::json::parse(text, nullptr, false);
    if (response_format.is_discarded()) {
      fail(ErrorCode::kInvalidArgument, "--response-format is not JSON: {}", o.response_format);
    }
  }
  boost::asio::io_context io;
  std::unique_ptr<LoadedDraft> draft;
  std::unique_ptr<Engine> engine;
  std::unique_ptr<Backend> backend;
  if (o.engine) {
    const EngineOptions engine_options = o.engine_flags.resolve(loaded.pool->size());
    loaded.pool.reset();  // the engine builds its own pool
    draft = load_draft_model(o.engine_flags.draft_model);
    engine = std::make_unique<Engine>(*loaded.model, *loaded.tokenizer, engine_options,
                                      draft ? draft->ref.get() : nullptr);
    workload.max_context = engine->max_context();
    SamplingParams sampling;
    sampling.temperature = static_cast<float>(o.temperature);
    sampling.seed = o.seed;
    if (!response_format.is_null()) {
      try {
        sampling.constraint = api::read_constraint({{"response_format", response_format}});
      } catch (const api::ApiError& e) {
        fail(ErrorCode::kInvalidArgument, "--response-format: {}", e.what());
      }
    }
    backend = std::make_unique<EngineBackend>(io, *engine, sampling, o.model.model_path);
  } else {
    HttpBackendOptions h;
    h.target = parse_url(o.url);
    if (!o.host.empty()) h.target.host = o.host;
    if (!o.port.empty()) h.target.port = o.port;
    if (o.api != "completions" && o.api != "chat") {
      fail(ErrorCode::kInvalidArgument, "--api must be completions or chat, got '{}'", o.api);
    }
    h.chat = o.api == "chat";
    h.api_key = o.api_key;
    const ServedModelInfo served = discover_model(h.target, o.api_key);
    h.model = o.served_model.empty() ? served.id : o.served_model;
    workload.max_context = served.max_model_len;
    h.temperature = o.temperature;
    h.force_length = o.force_length;
    h.response_format = response_format;
    h.timeout = std::chrono::milliseconds(static_cast<int64_t>(o.timeout_s * 1e3));
    backend = std::make_unique<HttpBackend>(io, h);
  }

  std::string fitted;
  workload = fit_to_context(workload, fitted);
  if (!fitted.empty()) spdlog::info("{}", fitted);

  BenchReport report;
  report.backend = backend->describe();
  report.workload = o.workload;
  report.slo = slo;
  report.settings = {{"workload", o.workload},
                     {"requests per run", std::to_string(o.num_requests)},
                     {"seed", std::to_string(o.seed)},
                     {"flags", o.flags_text}};
  if (o.price.needs_footprint() && !o.engine) {
    fail(ErrorCode::kInvalidArgument,
         "--price-per-core-hour and --price-per-gib-hour price the engine's threads and memory: "
         "they need --engine (for a server, give --price-per-hour)");
  }
  BenchOutcome outcome;
  ProgressPrinter printer;
  for (size_t i = 0; i < patterns.size(); ++i) {
    // Fresh words per run (same lengths), so a later run of a sweep never hits the prefix
    // cache filled by an earlier one.
    workload.text_seed = o.seed * 1000003 + i + 1;
    const std::vector<Conversation> conversations = build_workload(workload, counter);
    RunnerOptions runner;
    runner.arrival = patterns[i];
    runner.slo = slo;
    if (!o.quiet) runner.progress = std::ref(printer);
    const SpecStats before = engine ? engine->stats().spec : SpecStats{};
    const StepTotals steps_before = engine ? engine->stats().step_totals : StepTotals{};
    report.runs.push_back(run_benchmark(io, *backend, conversations, runner));
    const StepTotals steps =
        engine ? advise::step_totals_between(steps_before, engine->stats().step_totals)
               : StepTotals{};
    outcome.volumes.push_back(advise::run_volume(report.runs.back(), engine ? &steps : nullptr));
    if (engine && engine->stats().spec_enabled) {
      report.settings.emplace_back(fmt::format("speculation, run {}", i + 1),
                                   describe_speculation(before, engine->stats().spec));
    }
  }
  if (engine) {
    // What the advisor reads next to the run: the engine's record and the machine's facts
    // (the bandwidth probe runs after the workload so it does not disturb it).
    outcome.state = advise::capture_engine_state(
        *engine, advise::probe_machine(engine->options().threads, true),
        o.engine_flags.draft_model);
    if (!o.output_state.empty()) {
      advise::write_state_file(o.output_state, *outcome.state);
      spdlog::info("wrote {}", o.output_state);
    }
  } else if (!o.output_state.empty()) {
    fail(ErrorCode::kInvalidArgument,
         "--state needs --engine (a server's state is GET /v1/engine/state)");
  }
  if (o.price.given()) {
    const advise::Footprint footprint =
        outcome.state ? advise::footprint_of(*outcome.state) : advise::Footprint{};
    const double usd_per_hour = advise::hourly_usd(o.price, footprint);
    for (size_t i = 0; i < report.runs.size(); ++i) {
      report.settings.emplace_back(
          fmt::format("cost, run {}", i + 1),
          fmt::format(
              "at {}: {}", advise::describe_price(o.price, footprint),
              advise::format_token_cost(advise::token_cost(usd_per_hour, outcome.volumes[i]),
                                        outcome.volumes[i])));
    }
  }
  if (!o.quiet_tables) {
    std::fputs(format_tables(report).c_str(), stdout);
    for (const auto& [key, value] : report.settings) {
      if (key.starts_with("cost, run ")) std::printf("%s %s\n", key.c_str(), value.c_str());
    }
  }
  if (!o.output_json.empty()) {
    write_report_file(o.output_json, report);
    spdlog::info("wrote {}", o.output_json);
  }
  if (!o.output_html.empty()) {
    // With the engine in-process the report carries the advisor's reading of this run.
    std::string advice;
    if (outcome.state && !report.runs.empty()) {
      advise::AdviseInput input;
      input.state = &*outcome.state;
      input.run = &report.runs.back();
      input.draft_model = o.engine_flags.draft_model;
      advice = advise::render_advice_html(advise::advise(input));
    }
    write_html_file(o.output_html, report, advice);
    spdlog::info("wrote {}", o.output_html);
  }
  check_error_rate(report, o.max_error_rate);
  outcome.report = std::move(report);
  return outcome;
}

void add_bench_options(CLI::App* cmd, BenchOptions* o) {
  cmd->add_option("--url", o->url, "server root, http://HOST:PORT")->capture_default_str();
  cmd->add_option("--host", o->host, "the server's host (replaces --url's)");
  cmd->add_option("--port", o->port, "the server's port (replaces --url's)");
  cmd->add_flag("--engine", o->engine, "benchmark the in-process engine instead (needs -m)");
  cmd->add_option("--api", o->api, "completions | chat")->capture_default_str();
  cmd->add_option("--served-model-name,--served-model", o->served_model,
                  "the request's \"model\" field (default: first id of GET /v1/models)");
  cmd->add_option("--api-key", o->api_key, "sent as Authorization: Bearer KEY");
  cmd->add_option("--timeout", o->timeout_s, "seconds per request")->capture_default_str();
  add_model_options(*cmd, o->model);
  // With HTTP, -m is optional: it only supplies the tokenizer that makes prompt lengths exact.
  cmd->get_option("--model")->required(false);
  add_engine_flags(*cmd, o->engine_flags);

  cmd->add_option("--workload", o->workload,
                  "random | shared-prefix | multi-turn | variable-output | rag | jsonl")
      ->capture_default_str();
  cmd->add_option("--dataset", o->dataset,
                  "JSONL file: {\"prompt\" | \"messages\", \"output_len\"}");
  cmd->add_option("--num-requests,--num-prompts", o->num_requests, "requests per run")
      ->capture_default_str();
  cmd->add_option("--input-len", o->input_len,
                  "tokens of the varying prompt part: N, A-B, normal:M:SD, D@W+D@W");
  cmd->add_option("--output-len,-n,--n-predict", o->output_len,
                  "output tokens, same forms as --input-len");
  cmd->add_option("--prefix-len", o->prefix_len, "shared-prefix: system prompt tokens")
      ->capture_default_str();
  cmd->add_option("--num-prefixes", o->num_prefixes, "shared-prefix: distinct system prompts")
      ->capture_default_str();
  cmd->add_option("--context-len", o->context_len, "rag: retrieved context tokens")
      ->capture_default_str();
  cmd->add_option("--num-docs", o->num_docs, "rag: distinct contexts (0 = one per request)")
      ->capture_default_str();
  cmd->add_option("--turns", o->turns, "multi-turn: turns per conversation")->capture_default_str();
  cmd->add_option("--temperature", o->temperature, "sampling temperature")->capture_default_str();
  cmd->add_option("--response-format", o->response_format,
                  "attach this OpenAI response_format (JSON, or @FILE) to every request");
  cmd->add_flag("!--no-force-length", o->force_length,
                "do not send ignore_eos / min_tokens (for servers that reject them)");

  cmd->add_option("--concurrency", o->concurrency,
                  "closed loop: users, or a list to sweep (1,4,16)")
      ->capture_default_str();
  cmd->add_option("--rate,--rates,--request-rate", o->rates,
                  "open loop: requests/s, or a list to sweep (1,2,4,inf)");
  cmd->add_option("--burstiness", o->burstiness, "gamma shape: 1 = Poisson, < 1 = burstier")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--max-concurrency", o->max_concurrency, "open loop: cap on requests in flight");
  cmd->add_option("--seed", o->seed, "seed of lengths, texts and arrivals")->capture_default_str();
  cmd->add_option("--price-per-hour", o->price.per_hour,
                  "USD per hour of the machine: report cost per million input and output tokens "
                  "and at the SLO (docs/advise.md)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--price-per-core-hour", o->price.per_core_hour,
                  "USD per core-hour, times the engine's threads (adds to --price-per-hour; "
                  "--engine)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--price-per-gib-hour", o->price.per_gib_hour,
                  "USD per GiB-hour, times the memory the engine holds: weights + KV budget + "
                  "RAM offload (adds to --price-per-hour; --engine)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--slo", o->slo, "goodput bounds, e.g. ttft=500ms,tpot=50ms,e2e=10s");
  cmd->add_option("--output", o->output_json, "write all per-request timings + summary (JSON)");
  cmd->add_option("--html", o->output_html, "write a self-contained HTML report");
  cmd->add_flag("-q,--quiet", o->quiet, "no progress line");
  cmd->add_option("--max-error-rate", o->max_error_rate,
                  "exit 1 when more than this share of requests fail (default: only when all do)")
      ->check(CLI::Range(0.0, 1.0));
}

void register_bench(CLI::App& app) {
  auto o = std::make_shared<BenchOptions>();
  CLI::App* cmd = app.add_subcommand(
      "bench", "load a server (or the in-process engine) and report TTFT, TPOT, throughput");
  add_bench_options(cmd, o.get());
  cmd->add_option("--state", o->output_state,
                  "--engine: write the engine's state after the run (rapide advise --state)");

  auto files = std::make_shared<std::vector<std::string>>();
  CLI::App* compare = cmd->add_subcommand("compare", "compare two --output files side by side");
  compare->add_option("files", *files, "A.json B.json")->required()->expected(2);
  compare->callback([files] {
    const BenchReport a = read_report_file((*files)[0]);
    const BenchReport b = read_report_file((*files)[1]);
    std::fputs(format_compare(a, (*files)[0], b, (*files)[1]).c_str(), stdout);
  });
  cmd->require_subcommand(0, 1);
  cmd->callback([o, cmd, compare] {
    if (compare->parsed()) return;
    o->flags_text = cmd->config_to_str(false, false);
    o->sizes_given = cmd->count("--prefix-len") > 0 || cmd->count("--context-len") > 0;
    run_bench(*o);
  });
}

}  // namespace rapide::cli
