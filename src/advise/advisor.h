// `rapide advise`: the six questions, asked in order on measured data.
//
//   1. Is the model too big for the hardware?            -> quantization (pruning, distillation)
//   2. Do requests share a recurring prompt prefix?       -> prefix caching; static content first
//   3. Do requests arrive together with varied lengths?   -> continuous batching
//   4. Is the KV cache fragmented or over-provisioned?    -> paged KV, the right page size
//   5. Is per-token decode latency the priority?          -> speculative decoding
//   6. Do prefill and decode contend?                     -> prefill chunk, then disaggregation
//   then: does the model fit one machine (parallelism), does KV memory run out (offload, KV
//   quantization), do requests wait while KV memory and the step's token budget are free
//   (--max-seqs, --max-batch-tokens), does anyone wait for the answer (offline batch).
//
// Each question gives a Finding: the evidence (numbers), the verdict, and when a lever
// applies, which one, the engine flags that turn it on, the effect predicted from the
// measurements, and its cost. Every lever is gated on its measured precondition (a lever
// that cannot pay on this workload does not fire). The headline is the first finding that
// fires on a failure signal (a bottleneck measured past its threshold); then, before any
// optional lever (speculation, prefill chunks, offline batching), a failure signal seen
// below its threshold (`suspected`: named, with what would confirm it); then the first
// optional lever. When nothing fires, the advice is "nothing to change", with the
// configuration as it is. Levers rapide does not have yet are still diagnosed and marked
// unavailable.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "advise/engine_state.h"
#include "advise/workload_facts.h"
#include "loadgen/runner.h"

namespace rapide::advise {

// A metric `rapide bench` measures (verification compares it before and after).
enum class Metric { kTpotP50, kTtftMean, kItlP99, kOutputThroughput, kPreemptions };
const char* metric_name(Metric metric);
const char* metric_unit(Metric metric);  // "ms", "tok/s", ""
double metric_scale(Metric metric);      // seconds -> the unit
bool higher_is_better(Metric metric);

struct Prediction {
  Metric metric = Metric::kTpotP50;
  double before = 0.0;  // in seconds, tokens/s or a count (metric_scale converts for people)
  double after = 0.0;
};

struct Finding {
  int question = 0;  // 1..6; 7 for the checks beyond the six
  std::string id;    // stable name: "quantize", "prefix-cache", "static-content-first", ...
  std::string title;
  std::vector<std::string> evidence;
  std::string verdict;
  bool fires = false;
  std::string lever;
  // Engine flags that turn the lever on (verification reruns with them), e.g.
  // {{"--prefix-cache", "on"}}; empty when the lever is not a flag (fix the prompts).
  std::vector<std::pair<std::string, std::string>> flags;
  bool available = true;  // false: the lever is not in rapide yet
  std::optional<Prediction> prediction;
  std::string effect;  // the prediction in words
  std::string cost;
  // An optional lever (speculation, prefill chunks, offline batching): it improves a
  // workload without a failure, so it never outranks a failure signal.
  bool optional = false;
  // A failure signal seen below the threshold that names a lever (one near miss, a hit rate
  // somewhat below the ideal): `signal` says what was seen and what would confirm it.
  bool suspected = false;
  std::string signal;
};

struct Advice {
  std::string subject;  // model, machine
  std::vector<Finding> findings;
  int headline = -1;  // index of the headline finding (-1: healthy)
  bool healthy() const { return headline < 0; }
  // What nothing-to-change rests on: the switches as they are (batching, prefix cache, ...).
  std::string configuration;
};

struct AdviseInput {
  const EngineState* state = nullptr;
  const loadgen::RunResult* run = nullptr;  // optional: the workload's client-side figures
  std::string draft_model;                  // a draft model the user could use (question 5)
};

Advice advise(const AdviseInput& input);

std::string format_advice(const Advice& advice);
// The lever's flags as a user types them ("--prefix-cache on"); "--quantize TYPE" (applied
// by --verify with rapide quantize) reads as the command that makes the quantized file.
std::string change_text(const Finding& finding);
// One line: "nothing to change: ..." or "first: LEVER - EFFECT".
std::string headline_text(const Advice& advice);
nlohmann::json advice_to_json(const Advice& advice);

}  // namespace rapide::advise
