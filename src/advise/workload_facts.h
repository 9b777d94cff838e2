// The figures the six questions are asked about, derived once from an engine state and, when
// there is one, the client-side run of `rapide bench` (its latencies include everything the
// user waits for; the engine's own records cover runs without a benchmark, e.g. a live
// server). Each question reads these instead of recomputing its own averages.
#pragma once

#include <optional>

#include "advise/engine_state.h"
#include "loadgen/runner.h"

namespace rapide::advise {

// Decode step time as a function of rows, fitted on the decode-only steps recorded:
// seconds = fixed + per_row * rows. per_row is 0 when rows never varied (then only the
// mean of the rows seen is known).
struct StepCost {
  double fixed = 0.0;
  double per_row = 0.0;
  double mean_rows = 0.0;
  int samples = 0;
  double at(double rows) const { return fixed + per_row * rows; }
};
StepCost fit_decode_cost(const EngineState& state);

// The step cost curve of steps with prompt work, fitted on the recorded ones (prefill-only
// and mixed): seconds = fixed + per_token * prompt tokens + decode.per_row * decode rows.
// `fixed` holds what any such step costs whatever its chunk: reading the weights, and the
// attention each chunk does over the context before it (a long document's later chunks read
// its whole KV). The fit is trusted over the chunk sizes measured, [smallest, largest]: when
// they spanned less than half their mean, the intercept is not told apart and fixed is taken
// as the decode step's (`varied` false; a small chunk then looks cheaper than it may be).
struct PrefillCost {
  double fixed = 0.0;
  double per_token = 0.0;
  int samples = 0;
  bool varied = false;
  int smallest = 0, largest = 0;  // prompt tokens of the steps measured
  double at(double tokens) const { return fixed + per_token * tokens; }
};
PrefillCost fit_prefill_cost(const EngineState& state, const StepCost& decode);

struct WorkloadFacts {
  bool from_bench = false;      // latencies below come from a bench run
  int users = 0;                // closed-loop users, or the most requests running at once
  bool all_at_once = false;     // every request arrived together (rate = inf)
  bool latency_target = false;  // an SLO was given, or requests came one by one
  int requests = 0;
  double ttft_mean = 0, ttft_p50 = 0, tpot_p50 = 0;  // seconds
  // Inter-token latency: the client's gaps between tokens from a bench run, else the gaps
  // between the ends of the engine's recent steps, one per token a step fed to a decoding
  // sequence (itl_from_steps). 0: not measured.
  double itl_p50 = 0, itl_p99 = 0;
  bool itl_from_steps = false;
  double queue_mean = 0;         // seconds requests waited before their first step (engine record)
  double output_throughput = 0;  // tokens/s
  double prompt_mean = 0, output_mean = 0, output_cv = 0;  // tokens; cv = sd / mean
  double duration = 0;                                     // seconds
  // Decode-only steps: mean rows and seconds, and the p99 of the recent ones' seconds.
  double decode_rows = 0, decode_step = 0, decode_step_p99 = 0;
  // Of the recent decode-only steps' time, the share in planning and the forward pass (the
  // rest: sampling, stop rules, bookkeeping); 0 when the steps did not record it.
  double decode_forward_share = 0;
  // Of recent outputs' tokens, the share prompt lookup would have guessed (what --spec
  // ngram can expect accepted), over lookup_tokens tokens.
  double lookup_share = 0;
  int lookup_tokens = 0;
  // The most KV blocks held at once by running sequences (total - fewest free).
  int peak_used_blocks = 0;
  StepCost cost;
  // The roofline: seconds one decode step needs just to read the weights (0: unknown).
  double roofline_step = 0;
};

WorkloadFacts workload_facts(const EngineState& state, const loadgen::RunResult* run);

}  // namespace rapide::advise
