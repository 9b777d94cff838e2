// `rapide advise`: the six questions on measured data, a named lever, and proof by A/B.
//
//   rapide advise --url http://HOST:PORT          a live server's GET /v1/engine/state
//   rapide advise --url URL [workload flags]      ... after sending it that workload
//   rapide advise --state STATE.json [--bench RUN.json]   files `rapide bench --engine` wrote
//   rapide advise -m MODEL [bench flags]          run the workload in-process, then advise
//   rapide advise -m MODEL [bench flags] --verify  ... and rerun it with each lever on
//   ... --verify --apply FILE                      ... and write the verified settings as a
//                                                  --config file (rapide serve --config FILE)
//   any of these with --price-per-hour USD (or --price-per-core-hour / --price-per-gib-hour):
//   the cost per million tokens and each lever's saving; --text FILE measures the perplexity
//   a numerics-changing lever costs
//   rapide advise --prompts requests.jsonl [--fix OUT]    prompt lint (question 2)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include "advise/advisor.h"
#include "advise/cost.h"
#include "advise/decode_row_sweep.h"
#include "advise/engine_state.h"
#include "advise/prompt_lint.h"
#include "advise/verification.h"
#include "apps/rapide/bench_command.h"
#include "apps/rapide/commands.h"
#include "apps/rapide/lever_flags.h"
#include "apps/rapide/perplexity_command.h"
#include "base/error.h"
#include "base/logging.h"
#include "base/percentile.h"
#include "formats/model_file.h"
#include "kernels/kv_rows.h"
#include "loadgen/http_client.h"
#include "tokenizer/tokenizer.h"

namespace rapide::cli {

namespace {

struct AdviseOptions {
  BenchOptions bench;  // the workload --verify (and -m without files) runs
  std::string state_file, bench_file;
  bool json = false;
  bool verify = false;
  int verify_pairs = 3;  // --verify-pairs: A/B runs per lever, alternated; medians compared
  bool url_given = false;
  bool workload_given = false;  // any workload or arrival flag on the command line
  std::string prompts_file, fix_file;
  int block_size = 16;
  std::string text_file;   // --text: the perplexity a numerics lever costs
  int text_ctx = 256;      // its window
  std::string apply_file;  // --apply: the verified settings as a --config file
  const CLI::App* command = nullptr;
};

// Question 2's lint on a request log, tokenized by -m's tokenizer (bytes without one).
void lint(const AdviseOptions& o) {
  const std::vector<nlohmann::json> requests = advise::read_requests(o.prompts_file);
  std::unique_ptr<Tokenizer> tokenizer;
  if (!o.bench.model.model_path.empty()) {
    LoadOptions load_options;
    load_options.tokenizer_path = o.bench.model.tokenizer_path;
    tokenizer = Tokenizer::create(load_model(o.bench.model.model_path, load_options).tokenizer);
  }
  const advise::Encode encode = [&tokenizer](const std::string& text) {
    if (tokenizer) return tokenizer->encode(text, false);
    return std::vector<int32_t>(text.begin(), text.end());
  };
  // Without a tokenizer a block of bytes stands for a block of about as many tokens.
  const int block = tokenizer ? o.block_size : o.block_size * 4;
  const advise::LintReport report = advise::lint_prompts(requests, encode, block);
  if (o.json) {
    std::fputs((advise::lint_to_json(report).dump(2) + "\n").c_str(), stdout);
  } else {
    std::fputs(advise::format_lint(report).c_str(), stdout);
  }
  if (!o.fix_file.empty()) {
    advise::write_requests(o.fix_file, advise::fix_prompts(requests));
    spdlog::info("wrote {} canonicalised requests to {}", requests.size(), o.fix_file);
  }
}

advise::EngineState fetch_state(const std::string& url, const std::string& api_key) {
  const auto reply = loadgen::http_get(loadgen::parse_url(url), "/v1/engine/state", api_key,
                                       std::chrono::seconds(30));
  if (!reply) fail(ErrorCode::kUnavailable, "{} does not answer GET /v1/engine/state", url);
  if (reply->status != 200) {
    fail(ErrorCode::kUnavailable, "GET {}/v1/engine/state: HTTP {}: {}", url, reply->status,
         reply->body.substr(0, 200));
  }
  const nlohmann::json j = nlohmann::json::parse(reply->body, nullptr, false);
  if (j.is_discarded()) fail(ErrorCode::kCorrupt, "GET /v1/engine/state did not return JSON");
  return advise::state_from_json(j);
}

void print(const advise::Advice& advice, const std::vector<advise::Verification>* verified,
           const advise::CostReport* cost, const std::string& applied, bool json) {
  if (json) {
    nlohmann::json j = advise::advice_to_json(advice);
    if (verified) j["verification"] = advise::verifications_to_json(*verified);
    if (cost) j["cost"] = advise::cost_report_to_json(*cost);
    if (!applied.empty()) j["applied"] = applied;
    std::fputs((j.dump(2) + "\n").c_str(), stdout);
    return;
  }
  std::fputs(advise::format_advice(advice).c_str(), stdout);
  if (verified) {
    std::fputs("\nverification (same workload, lever off = A, on = B):\n", stdout);
    std::fputs(advise::format_verifications(*verified).c_str(), stdout);
  }
  if (cost) std::fputs(("\n" + advise::format_cost_report(*cost)).c_str(), stdout);
  if (!applied.empty()) std::fputs(("\n" + applied + "\n").c_str(), stdout);
}

// The perplexity of --text with the model and KV type of `o`, by `rapide perplexity`'s code.
double perplexity_of(const AdviseOptions& o, const BenchOptions& run) {
  PerplexityOptions p;
  p.model = run.model;
  p.text_path = o.text_file;
  p.context = o.text_ctx;
  p.batch = o.text_ctx;
  p.kv_type = run.engine_flags.kv_type;
  p.progress = false;
  return measure_perplexity(p).perplexity;
}

// Each numerics-changing lever's perplexity before and after, with --text; the lever's
// options are `o.bench` with its flags applied (a quantized model in `scratch`).
void measure_quality(const AdviseOptions& o, const advise::Advice& advice, advise::CostReport& cost,
                     const std::string& scratch) {
  if (o.text_file.empty()) return;
  std::optional<double> before;
  for (advise::LeverCost& c : cost.levers) {
    if (!c.numerics) continue;
    const auto finding = std::find_if(advice.findings.begin(), advice.findings.end(),
                                      [&](const advise::Finding& f) { return f.id == c.lever; });
    if (finding == advice.findings.end()) continue;
    if (!before) before = perplexity_of(o, o.bench);
    BenchOptions lever = o.bench;
    apply_lever(lever, finding->flags, scratch);
    c.perplexity = advise::Perplexity{*before, perplexity_of(o, lever)};
    spdlog::info("advise: {} perplexity {:.4f} -> {:.4f}", c.lever, c.perplexity->before,
                 c.perplexity->after);
  }
}

// The engine and model keys among `command`'s flags given on its command line (or its
// --config file), as `key=value` lines CLI11 wrote: the baseline the levers were measured on.
std::vector<std::pair<std::string, std::string>> given_engine_settings(const CLI::App& command) {
  CLI::App probe;
  ModelOptions model;
  EngineFlags engine;
  add_model_options(probe, model);
  add_engine_flags(probe, engine);
  std::vector<std::pair<std::string, std::string>> out;
  std::istringstream lines(command.config_to_str(false, false));
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with("[")) break;  // a nested subcommand's section
    const size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = line.substr(0, eq);
    bool known = false;
    for (const CLI::Option* option : probe.get_options()) {
      known = known || (option->get_configurable() && option->get_single_name() == key);
    }
    if (known) out.emplace_back(key, line.substr(eq + 1));
  }
  return out;
}

// A value as CLI11 writes it in TOML: numbers and booleans bare, anything else quoted.
std::string toml_value(const std::string& value) {
  if (value == "true" || value == "false") return value;
  char* end = nullptr;
  std::strtod(value.c_str(), &end);
  if (!value.empty() && end == value.c_str() + value.size()) return value;
  std::string quoted = "\"";
  for (const char c : value) {
    if (c == '"' || c == '\\') quoted += '\\';
    quoted += c;
  }
  return quoted + "\"";
}

struct VerifiedLever {
  const advise::Finding* finding = nullptr;
  advise::Verification verification;
  std::string model_path;  // the B run's model (a quantized file in the scratch folder)
};

// Writes the baseline's engine settings with every lever verified within the band on top, as
// a --config file; a quantized model is kept next to it. Returns what it says to the user.
std::string apply_verified(const AdviseOptions& o, const std::vector<VerifiedLever>& levers) {
  std::vector<std::pair<std::string, std::string>> settings = given_engine_settings(*o.command);
  const auto set = [&settings](const std::string& key, const std::string& value) {
    for (auto& [k, v] : settings) {
      if (k == key) {
        v = value;
        return;
      }
    }
    settings.emplace_back(key, value);
  };
  const std::filesystem::path file(o.apply_file);
  std::string header, applied;
  for (const VerifiedLever& l : levers) {
    const advise::Verification& v = l.verification;
    const bool ok = v.verdict == advise::VerifyVerdict::kVerified;
    const double scale = advise::metric_scale(v.metric);
    header += fmt::format(
        "# {} {}: {} {:.2f} -> {:.2f} {} predicted, {:.2f} -> {:.2f} measured ({}){}\n",
        ok ? "applied" : "not applied", v.change, advise::metric_name(v.metric),
        v.predicted_before * scale, v.predicted_after * scale, advise::metric_unit(v.metric),
        v.measured_before * scale, v.measured_after * scale, advise::verify_verdict_name(v.verdict),
        ok ? "" : ": only levers verified within the band are applied");
    if (!ok) continue;
    applied += (applied.empty() ? "" : ", ") + v.change;
    for (const auto& [flag, value] : l.finding->flags) {
      if (flag == "--quantize") {
        // The quantized model the B run measured, kept beside the config file.
        const std::filesystem::path kept =
            file.parent_path() / std::filesystem::path(l.model_path).filename();
        std::filesystem::copy_file(l.model_path, kept,
                                   std::filesystem::copy_options::overwrite_existing);
        set("model", toml_value(std::filesystem::absolute(kept).string()));
      } else {
        set(flag.substr(2), toml_value(value));
      }
    }
  }
  std::string text = fmt::format(
      "# rapide advise --verify --apply: the settings the verification measured, levers "
      "verified within ±35 % of their prediction on top of the run's own engine flags.\n"
      "# Start a server with them: rapide serve --config {}\n{}",
      o.apply_file, header);
  for (auto& [key, value] : settings) {
    // A relative model path would resolve against wherever the server starts.
    if ((key == "model" || key == "tokenizer" || key == "draft-model") && value.size() > 2 &&
        value.front() == '"' && !value.starts_with("\"/")) {
      value = toml_value(std::filesystem::absolute(value.substr(1, value.size() - 2)).string());
    }
    text += key + "=" + value + "\n";
  }
  std::ofstream out(o.apply_file);
  out << text;
  if (!out) fail(ErrorCode::kUnavailable, "cannot write {}", o.apply_file);
  return applied.empty() ? fmt::format(
                               "applied: no lever was verified within the band; {} holds the run's "
                               "own settings only",
                               o.apply_file)
                         : fmt::format(
                               "applied: {} written to {}; start a server with them: rapide serve "
                               "--config {}",
                               applied, o.apply_file, o.apply_file);
}

// The row sweep for the state of run A (advise/decode_row_sweep.h): on A's model and threads,
// at the context A's requests decoded at, up to the rows its demand asked for (running plus
// waiting at the peak, at least 8 for speculation's guesses, at most --max-seqs and 64).
void sweep_decode_rows(const BenchOptions& bench, advise::EngineState& state) {
  if (state.requests.empty()) return;
  double prompt = 0, output = 0;
  for (const advise::RequestSummary& r : state.requests) {
    prompt += r.prompt_tokens;
    output += r.completion_tokens;
  }
  const double n = static_cast<double>(state.requests.size());
  advise::DecodeSweepOptions sweep;
  sweep.context = std::clamp(static_cast<int>(std::lround(prompt / n + output / n / 2.0)), 1,
                             std::max(1, state.model.max_context - 2));
  const int demand = state.step_totals.max_running + state.step_totals.max_waiting;
  sweep.max_rows = std::clamp(demand, 8, std::clamp(state.config.max_seqs, 8, 64));
  sweep.kv_type = parse_kv_type(state.config.kv_type);
  sweep.block_size = std::max(1, state.config.kv_block_size);
  spdlog::info("advise: timing decode steps of 1-{} rows at context {}", sweep.max_rows,
               sweep.context);
  LoadedModel loaded = load_for_inference(bench.model);
  state.decode_curve = advise::sweep_decode_rows(*loaded.model, *loaded.pool, sweep);
}

// Runs the workload (A), advises, and with --verify reruns it once per lever that fired
// with an available, flag-shaped change and a prediction (B).
void advise_by_running(AdviseOptions& o) {
  if (o.bench.model.model_path.empty()) {
    fail(ErrorCode::kInvalidArgument, "running a workload needs -m MODEL");
  }
  o.bench.engine = true;
  o.bench.quiet_tables = o.json;
  BenchOptions baseline = o.bench;
  BenchOutcome a = run_bench(baseline);
  sweep_decode_rows(o.bench, *a.state);
  advise::AdviseInput input;
  input.state = &*a.state;
  input.run = &a.report.runs.back();
  input.draft_model = o.bench.engine_flags.draft_model;
  const advise::Advice advice = advise::advise(input);
  const std::filesystem::path scratch =
      std::filesystem::temp_directory_path() / fmt::format("rapide-advise-{}", getpid());
  std::filesystem::create_directories(scratch);
  struct RemoveScratch {
    std::filesystem::path path;
    ~RemoveScratch() {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  } remove_scratch{scratch};
  std::optional<advise::CostReport> cost;
  if (o.bench.price.given()) {
    cost = advise::price_advice(advice, *a.state, a.volumes.back(), o.bench.price);
    measure_quality(o, advice, *cost, scratch.string());
  }
  if (!o.verify) {
    print(advice, nullptr, cost ? &*cost : nullptr, "", o.json);
    return;
  }
  std::vector<advise::Verification> rows;
  std::vector<VerifiedLever> levers;
  for (const advise::Finding& f : advice.findings) {
    if (!f.fires || !f.available || f.flags.empty() || !f.prediction) continue;
    BenchOptions lever = o.bench;
    lever.output_json.clear();
    lever.output_html.clear();
    lever.output_state.clear();
    apply_lever(lever, f.flags, scratch.string());
    // Pairs alternate off and on, the first A being the run the advice came from; the
    // medians are judged (a lever's effect is a comparison in time, and other load on the
    // machine comes and goes).
    const advise::Metric metric = f.prediction->metric;
    std::vector<double> before{advise::measure(metric, a.report.runs.back().summary, *a.state)};
    std::vector<double> after;
    std::optional<BenchOutcome> last_b;
    for (int pair = 0; pair < o.verify_pairs; ++pair) {
      if (pair > 0) {
        BenchOptions again = baseline;
        again.output_json.clear();
        again.output_html.clear();
        again.output_state.clear();
        const BenchOutcome a_again = run_bench(again);
        before.push_back(
            advise::measure(metric, a_again.report.runs.back().summary, *a_again.state));
      }
      last_b = run_bench(lever);
      after.push_back(advise::measure(metric, last_b->report.runs.back().summary, *last_b->state));
    }
    const BenchOutcome& b = *last_b;
    advise::Verification v = advise::judge(f, median(before), median(after));
    v.pairs = o.verify_pairs;
    if (b.state->spec.enabled) {
      v.note = fmt::format("acceptance measured {:.0f} % of {} guesses",
                           b.state->spec.acceptance() * 100.0, b.state->spec.proposed);
    }
    rows.push_back(v);
    levers.push_back(VerifiedLever{&f, v, lever.model.model_path});
    if (cost) {
      advise::LeverCost measured = advise::measured_lever_cost(
          f, *a.state, a.volumes.back(), *b.state, b.volumes.back(), o.bench.price);
      for (const advise::LeverCost& predicted : cost->levers) {
        if (predicted.lever == f.id) measured.perplexity = predicted.perplexity;
      }
      cost->levers.push_back(measured);
    }
  }
  const std::string applied = o.apply_file.empty() ? "" : apply_verified(o, levers);
  print(advice, &rows, cost ? &*cost : nullptr, applied, o.json);
}

// A state with nothing served: no figure to ask the questions about. Says so, and how to get
// traffic, instead of reading an empty record as a healthy one.
bool report_no_traffic(const advise::EngineState& state, const AdviseOptions& o) {
  if (state.counters.requests_submitted > 0 || !state.steps.empty()) return false;
  const std::string where = o.url_given ? fmt::format("the server at {}", o.bench.url)
                                        : fmt::format("the engine of {}", o.state_file);
  const std::string how =
      o.url_given
          ? fmt::format(
                "send it your usual traffic and run this again, or let advise send a workload "
                "first: rapide advise --url {} --workload random --input-len 256 --output-len "
                "128 --num-requests 64 --concurrency 4 (any rapide bench workload flags; "
                "--workload jsonl --dataset FILE replays your own requests)",
                o.bench.url)
          : "record one with traffic: rapide bench --engine -m MODEL [workload flags] --state "
            "FILE";
  const std::string message = fmt::format(
      "no traffic yet: {} has served no request, so there is nothing to measure. {}", where, how);
  if (o.json) {
    std::fputs((nlohmann::json{{"traffic", false}, {"message", message}}.dump(2) + "\n").c_str(),
               stdout);
  } else {
    std::fputs(("rapide advise: " + message + "\n").c_str(), stdout);
  }
  return true;
}

void run_advise(AdviseOptions& o) {
  if (!o.prompts_file.empty()) {
    lint(o);
    return;
  }
  if (!o.fix_file.empty()) fail(ErrorCode::kInvalidArgument, "--fix needs --prompts FILE");
  if (o.verify && o.url_given) {
    fail(ErrorCode::kInvalidArgument,
         "--verify reruns the workload in-process (-m MODEL, no --url): it does not restart the "
         "server at --url with each lever");
  }
  if (!o.apply_file.empty() && !o.verify) {
    fail(ErrorCode::kInvalidArgument,
         "--apply writes the settings --verify proved: give --verify (and -m MODEL) too");
  }
  if (!o.text_file.empty() && !o.bench.price.given()) {
    fail(ErrorCode::kInvalidArgument,
         "--text measures the quality cost in the cost table: give --price-per-hour (or the "
         "per-core / per-GiB form) too");
  }
  if (o.verify || (o.state_file.empty() && !o.url_given && !o.bench.model.model_path.empty())) {
    advise_by_running(o);
    return;
  }
  advise::EngineState state;
  std::optional<loadgen::BenchReport> report;
  if (!o.state_file.empty()) {
    state = advise::read_state_file(o.state_file);
  } else if (o.url_given) {
    if (o.workload_given) {
      // The workload flags are a workload to send: run it against the server first, then
      // read what the server recorded of it (with the run's client-side figures).
      if (!o.bench_file.empty()) {
        fail(ErrorCode::kInvalidArgument, "give --bench FILE or workload flags, not both");
      }
      BenchOptions traffic = o.bench;
      traffic.engine = false;
      traffic.quiet_tables = o.json;
      report = run_bench(traffic).report;
    }
    state = fetch_state(o.bench.url, o.bench.api_key);
  } else {
    fail(ErrorCode::kInvalidArgument,
         "give --url (a live server), --state FILE [--bench RUN.json], -m MODEL (run a "
         "workload), or --prompts FILE");
  }
  if (report_no_traffic(state, o)) return;
  if (!o.bench_file.empty()) {
    report = loadgen::read_report_file(o.bench_file);
    if (report->runs.empty()) fail(ErrorCode::kInvalidArgument, "{} has no runs", o.bench_file);
  }
  advise::AdviseInput input;
  input.state = &state;
  input.run = report ? &report->runs.back() : nullptr;
  input.draft_model = o.bench.engine_flags.draft_model;
  const advise::Advice advice = advise::advise(input);
  std::optional<advise::CostReport> cost;
  if (o.bench.price.given()) {
    if (!report) {
      fail(ErrorCode::kInvalidArgument,
           "a price needs a run's tokens and time: give --bench RUN.json (rapide bench "
           "--output), or workload flags with --url");
    }
    // The state covers the engine's life, not this run: the run's TTFT splits its time.
    cost = advise::price_advice(advice, state, advise::run_volume(report->runs.back(), nullptr),
                                o.bench.price);
    if (!o.text_file.empty()) {
      spdlog::warn("--text is measured on runs advise makes itself (-m MODEL): not measured here");
    }
  }
  print(advice, nullptr, cost ? &*cost : nullptr, "", o.json);
}

}  // namespace

void register_advise(CLI::App& app) {
  auto o = std::make_shared<AdviseOptions>();
  CLI::App* cmd = app.add_subcommand(
      "advise",
      "ask the six questions on measured data: which lever, its expected effect, "
      "its cost (and --verify it)");
  add_bench_options(cmd, &o->bench);
  cmd->get_option("--model")->required(false);
  cmd->add_option("--state", o->state_file, "engine state: rapide bench --engine --state FILE");
  cmd->add_option("--bench", o->bench_file, "the run's JSON: rapide bench --output FILE");
  cmd->add_flag("--json", o->json, "print the advice as JSON");
  cmd->add_flag("--verify", o->verify,
                "rerun the workload (in-process, -m) with each recommended lever on and report "
                "predicted vs measured effect");
  cmd->add_option("--verify-pairs", o->verify_pairs,
                  "with --verify: run lever off and on this many times each, alternating "
                  "(A B A B ...), and compare the medians: load that comes and goes on a shared "
                  "machine then moves both sides alike")
      ->check(CLI::Range(1, 20))
      ->capture_default_str();
  cmd->add_option("--prompts", o->prompts_file,
                  "prompt lint: a JSONL request log ({\"prompt\"} or {\"messages\"} per line)");
  cmd->add_option("--fix", o->fix_file, "with --prompts: write the canonicalised requests here");
  cmd->add_option("--text", o->text_file,
                  "with a price: measure each numerics-changing lever's perplexity on this text "
                  "(rapide perplexity's method)");
  cmd->add_option("--text-ctx", o->text_ctx, "with --text: the perplexity window in tokens")
      ->check(CLI::Range(4, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--apply", o->apply_file,
                  "with --verify: write the engine settings with every lever verified within "
                  "the band to this --config file (rapide serve --config FILE)");
  cmd->add_option("--lint-block-size", o->block_size, "with --prompts: tokens per cache block")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  cmd->callback([o, cmd] {
    o->command = cmd;
    o->url_given = cmd->get_option("--url")->count() > 0;
    for (const char* flag : {"--workload", "--dataset", "--num-requests", "--input-len",
                             "--output-len", "--prefix-len", "--num-prefixes", "--context-len",
                             "--num-docs", "--turns", "--concurrency", "--rate", "--burstiness",
                             "--max-concurrency", "--slo", "--response-format", "--temperature"}) {
      o->workload_given = o->workload_given || cmd->get_option(flag)->count() > 0;
    }
    run_advise(*o);
  });
}

}  // namespace rapide::cli
