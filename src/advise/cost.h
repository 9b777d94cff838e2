// The money arithmetic of `rapide advise` and `rapide bench` (--price-per-hour and the
// per-core / per-GiB form): every figure a run measured or a lever predicts, as US dollars per
// million tokens. All of it lives here so each rule is written once:
//
//   price      USD/h = per_hour + cores x per_core_hour + GiB x per_gib_hour, where cores are
//              the engine's threads and GiB the memory the deployment holds (the weights plus
//              the KV cache budget, plus any RAM offload tier)
//   input      price x run seconds x prefill share / 3600 / input tokens x 1e6
//   output     price x run seconds x (1 - prefill share) / 3600 / output tokens x 1e6
//              (the prefill share splits the machine's time between the prompts and the
//              answers: the engine's step time when it was recorded, else the requests' time to
//              first token over their whole time)
//   at the SLO price x run seconds / 3600 / output tokens of the requests that met the SLO
//              x 1e6: all the machine's time, paid for by the good answers only (goodput)
//   total      price x run seconds / 3600 / (input + output tokens) x 1e6
//
// A lever's saving is the cost before minus the cost after: a predicted time per output token
// scales the output cost, a predicted time to first token the input cost, a predicted
// throughput both; a lever that changes the memory held changes the price through
// per_gib_hour. A lever predicted on latency only (ITL p99, preemptions) has no saving
// figure: none is invented.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "advise/advisor.h"
#include "advise/engine_state.h"
#include "engine/step_totals.h"
#include "loadgen/runner.h"

namespace rapide::advise {

struct Price {
  double per_hour = 0.0, per_core_hour = 0.0, per_gib_hour = 0.0;  // USD
  bool given() const { return per_hour > 0.0 || per_core_hour > 0.0 || per_gib_hour > 0.0; }
  bool needs_footprint() const { return per_core_hour > 0.0 || per_gib_hour > 0.0; }
};

// What the price is charged on.
struct Footprint {
  double cores = 0.0;
  uint64_t memory_bytes = 0;
};

// The footprint of the engine a state describes: its threads; weights + KV budget + offload.
Footprint footprint_of(const EngineState& state);
double hourly_usd(const Price& price, const Footprint& footprint);
// "$0.10/h + 2 cores x $0.03/h + 0.42 GiB x $0.005/h = $0.1621/h"
std::string describe_price(const Price& price, const Footprint& footprint);

// What a run produced in its wall time.
struct RunVolume {
  double seconds = 0.0;
  double input_tokens = 0.0, output_tokens = 0.0;
  double good_output_tokens = 0.0;  // of the requests that met the SLO (all without one)
  size_t good_requests = 0, completed_requests = 0;
  double prefill_share = 0.0;  // of the machine's time, spent on prompts (0..1)
  std::string share_source;    // "engine step time" | "time to first token"
};

// The share of step time spent on prompts: prefill-only steps, plus the part of mixed steps
// their prompt tokens cost at the per-token prices the pure steps measured (split by tokens
// when a pure kind is missing). nullopt without steps.
std::optional<double> prefill_share(const StepTotals& totals);
// The steps taken between two snapshots of the engine's totals (one run of a sweep).
StepTotals step_totals_between(const StepTotals& before, const StepTotals& after);
// A run's volume; the prefill share from `totals` when given (and it has steps), else from
// the requests' TTFT over their end-to-end time.
RunVolume run_volume(const loadgen::RunResult& run, const StepTotals* totals);

struct TokenCost {
  double usd_per_hour = 0.0;
  // USD per million tokens; nullopt where there is no such token to divide by.
  std::optional<double> input, output, output_at_slo, total;
};
TokenCost token_cost(double usd_per_hour, const RunVolume& volume);

// Bytes of memory the lever adds (negative: frees), from the finding's flags and the state.
int64_t lever_memory_delta(const Finding& finding, const EngineState& state);
// The levers that change numerics (quantization, KV type, compression, pruning): their
// quality cost is a perplexity delta.
bool changes_numerics(const Finding& finding);

struct Perplexity {
  double before = 0.0, after = 0.0;
};

struct LeverCost {
  std::string lever, change;
  int64_t memory_delta = 0;  // bytes
  double usd_per_hour_after = 0.0;
  TokenCost after;  // predicted (or measured with --verify)
  // USD per million tokens saved (negative: it costs more); nullopt: not predicted.
  std::optional<double> saving_input, saving_output, saving_at_slo;
  bool measured = false;  // from the --verify run, not the prediction
  bool numerics = false;
  std::optional<Perplexity> perplexity;  // measured with --text, else not measured
  std::string note;                      // why a saving is missing
};

// The predicted cost of a fired lever: the baseline's cost with the prediction's change and
// the memory delta applied.
LeverCost predict_lever_cost(const Finding& finding, const EngineState& state, const Price& price,
                             const RunVolume& baseline);
// The same lever, measured: the B run's own cost (its footprint from its state).
LeverCost measured_lever_cost(const Finding& finding, const EngineState& state_a,
                              const RunVolume& volume_a, const EngineState& state_b,
                              const RunVolume& volume_b, const Price& price);

struct CostReport {
  Price price;
  Footprint footprint;
  RunVolume volume;
  TokenCost cost;
  std::vector<LeverCost> levers;
};

// The run's cost and the predicted cost of every lever that fired with flags to apply.
CostReport price_advice(const Advice& advice, const EngineState& state, const RunVolume& volume,
                        const Price& price);

std::string format_token_cost(const TokenCost& cost, const RunVolume& volume);
std::string format_cost_report(const CostReport& report);
nlohmann::json token_cost_to_json(const TokenCost& cost);
nlohmann::json cost_report_to_json(const CostReport& report);

}  // namespace rapide::advise
