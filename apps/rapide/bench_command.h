// `rapide bench`'s options and run, shared with `rapide advise --verify` (which runs the
// same workload with a lever off and on).
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>

#include "advise/cost.h"
#include "advise/engine_state.h"
#include "apps/rapide/engine_flags.h"
#include "apps/rapide/model_options.h"
#include "loadgen/bench_report.h"

namespace rapide::cli {

struct BenchOptions {
  // Target.
  std::string url = "http://127.0.0.1:8080";
  std::string host, port;  // vLLM's spelling of --url's parts; replace them when given
  bool engine = false;
  std::string api = "completions";
  std::string served_model;
  std::string api_key;
  double timeout_s = 600;
  ModelOptions model;
  EngineFlags engine_flags;
  // Workload.
  std::string workload = "random";
  std::string dataset;
  size_t num_requests = 100;
  std::string input_len, output_len;
  int prefix_len = 1000, num_prefixes = 1, context_len = 3000, num_docs = 0, turns = 4;
  double temperature = 0.0;
  bool force_length = true;
  std::string response_format;  // JSON, or @FILE holding it
  // Arrival.
  std::string concurrency = "1";
  std::string rates;
  double burstiness = 1.0;
  int max_concurrency = 0;
  uint64_t seed = 0;
  // Output.
  std::string slo;
  std::string output_json, output_html;
  std::string output_state;   // --state: the engine state after the runs
  bool quiet_tables = false;  // no result tables on stdout (advise --verify prints its own)
  bool quiet = false;
  double max_error_rate = -1;  // < 0: fail only when every request failed
  bool sizes_given = false;    // --prefix-len or --context-len on the command line
  std::string flags_text;
  advise::Price price;  // --price-per-hour & co: cost per million tokens (advise/cost.h)
};

// Adds the target, workload, arrival, price and output options (not --state) to `cmd`.
void add_bench_options(CLI::App* cmd, BenchOptions* o);

struct BenchOutcome {
  loadgen::BenchReport report;
  std::optional<advise::EngineState> state;  // with --engine
  std::vector<advise::RunVolume> volumes;    // per run: tokens, time, prefill share
};

// Runs every arrival pattern of `o`, prints the tables, writes the files asked for.
BenchOutcome run_bench(BenchOptions& o);

}  // namespace rapide::cli
