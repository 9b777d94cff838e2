// `rapide advise`: the six questions on measured data, a named lever, and proof by A/B.
//
//   rapide advise --url http://HOST:PORT          a live server's GET /v1/engine/state
//   rapide advise --url URL [workload flags]      ... after sending it that workload
//   rapide advise --state STATE.json [--bench RUN.json]   files `rapide bench --engine` wrote
//   rapide advise -m MODEL [bench flags]          run the workload in-process, then advise
//   rapide advise -m MODEL [bench flags] --verify  ... and rerun it with each lever on
//   rapide advise --prompts requests.jsonl [--fix OUT]    prompt lint (question 2)
#include <cstdio>
#include <filesystem>

#include "advise/advisor.h"
#include "advise/engine_state.h"
#include "advise/prompt_lint.h"
#include "advise/verification.h"
#include "apps/rapide/bench_command.h"
#include "apps/rapide/commands.h"
#include "apps/rapide/lever_flags.h"
#include "base/error.h"
#include "base/logging.h"
#include "bench/http_client.h"
#include "formats/model_file.h"
#include "tokenizer/tokenizer.h"

namespace rapide::cli {

namespace {

struct AdviseOptions {
  BenchOptions bench;  // the workload --verify (and -m without files) runs
  std::string state_file, bench_file;
  bool json = false;
  bool verify = false;
  bool url_given = false;
  bool workload_given = false;  // any workload or arrival flag on the command line
  std::string prompts_file, fix_file;
  int block_size = 16;
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
  const auto reply =
      bench::http_get(bench::parse_url(url), "/v1/engine/state", api_key, std::chrono::seconds(30));
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
           bool json) {
  if (json) {
    nlohmann::json j = advise::advice_to_json(advice);
    if (verified) j["verification"] = advise::verifications_to_json(*verified);
    std::fputs((j.dump(2) + "\n").c_str(), stdout);
    return;
  }
  std::fputs(advise::format_advice(advice).c_str(), stdout);
  if (verified) {
    std::fputs("\nverification (same workload, lever off = A, on = B):\n", stdout);
    std::fputs(advise::format_verifications(*verified).c_str(), stdout);
  }
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
  const BenchOutcome a = run_bench(baseline);
  advise::AdviseInput input;
  input.state = &*a.state;
  input.run = &a.report.runs.back();
  input.draft_model = o.bench.engine_flags.draft_model;
  const advise::Advice advice = advise::advise(input);
  if (!o.verify) {
    print(advice, nullptr, o.json);
    return;
  }
  std::vector<advise::Verification> rows;
  const std::filesystem::path scratch =
      std::filesystem::temp_directory_path() / fmt::format("rapide-advise-{}", getpid());
  std::filesystem::create_directories(scratch);
  for (const advise::Finding& f : advice.findings) {
    if (!f.fires || !f.available || f.flags.empty() || !f.prediction) continue;
    BenchOptions lever = o.bench;
    lever.output_json.clear();
    lever.output_html.clear();
    lever.output_state.clear();
    apply_lever(lever, f.flags, scratch.string());
    const BenchOutcome b = run_bench(lever);
    advise::Verification v = advise::judge(
        f, advise::measure(f.prediction->metric, a.report.runs.back().summary, *a.state),
        advise::measure(f.prediction->metric, b.report.runs.back().summary, *b.state));
    if (b.state->spec.enabled) {
      v.note = fmt::format("acceptance measured {:.0f} % of {} guesses",
                           b.state->spec.acceptance() * 100.0, b.state->spec.proposed);
    }
    rows.push_back(v);
  }
  std::filesystem::remove_all(scratch);
  print(advice, &rows, o.json);
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
  if (o.verify || (o.state_file.empty() && !o.url_given && !o.bench.model.model_path.empty())) {
    advise_by_running(o);
    return;
  }
  advise::EngineState state;
  std::optional<bench::BenchReport> report;
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
    report = bench::read_report_file(o.bench_file);
    if (report->runs.empty()) fail(ErrorCode::kInvalidArgument, "{} has no runs", o.bench_file);
  }
  advise::AdviseInput input;
  input.state = &state;
  input.run = report ? &report->runs.back() : nullptr;
  input.draft_model = o.bench.engine_flags.draft_model;
  print(advise::advise(input), nullptr, o.json);
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
  cmd->add_option("--prompts", o->prompts_file,
                  "prompt lint: a JSONL request log ({\"prompt\"} or {\"messages\"} per line)");
  cmd->add_option("--fix", o->fix_file, "with --prompts: write the canonicalised requests here");
  cmd->add_option("--lint-block-size", o->block_size, "with --prompts: tokens per cache block")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  cmd->callback([o, cmd] {
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
