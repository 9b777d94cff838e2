// The figures the six questions are asked about, derived once from an engine state and, when
// there is one, the client-side run of `rapide bench` (its latencies include everything the
// user waits for; the engine's own records cover runs without a benchmark, e.g. a live
// server). Each question reads these instead of recomputing its own averages.
#pragma once

#include <optional>

#include "advise/engine_state.h"
#include "bench/runner.h"

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

struct WorkloadFacts {
  bool from_bench = false;      // latencies below come from a bench run
  int users = 0;                // closed-loop users, or the most requests running at once
  bool all_at_once = false;     // every request arrived together (rate = inf)
  bool latency_target = false;  // an SLO was given, or requests came one by one
  int requests = 0;
  double ttft_mean = 0, ttft_p50 = 0, tpot_p50 = 0, itl_p50 = 0, itl_p99 = 0;  // seconds
  double output_throughput = 0;                                                // tokens/s
  double prompt_mean = 0, output_mean = 0, output_cv = 0;  // tokens; cv = sd / mean
  double duration = 0;                                     // seconds
  // Decode-only steps: mean rows and seconds; the decode step at one row.
  double decode_rows = 0, decode_step = 0;
  StepCost cost;
  // The roofline: seconds one decode step needs just to read the weights (0: unknown).
  double roofline_step = 0;
};

WorkloadFacts workload_facts(const EngineState& state, const bench::RunResult* run);

}  // namespace rapide::advise
