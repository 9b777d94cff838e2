// What the advisor reads about a running engine: its configuration (every switch), the
// machine (cores, memory, measured read bandwidth), the model (bytes a decode step reads),
// and what the engine recorded (recent steps, step totals by kind, recent requests, prefix
// cache counters and near-miss records, prefix sharing, speculation, preemptions, queue).
//
// Plain data, taken from Engine::stats() by capture_engine_state and written as JSON: the
// server's GET /v1/engine/state, `rapide bench --state`, and `rapide advise --state` all use
// this one form. The state carries the last prompts' text (the prompt lint reads them): the
// server keeps GET /v1/engine/state behind its API key. Times are seconds (steps and requests
// relative to the oldest one shown), so a state file can be read back on another machine.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "advise/decode_curve.h"
#include "engine/engine.h"

namespace rapide::advise {

struct MachineFacts {
  int cores = 0;                  // physical cores
  int threads = 0;                // the engine's threads
  uint64_t memory_total = 0;      // bytes
  uint64_t memory_available = 0;  // MemAvailable when captured
  double read_bandwidth = 0.0;    // bytes/s the engine's threads read (0: not measured)
  uint64_t last_level_cache = 0;  // bytes (0: unknown): weights that fit are not bandwidth-bound
};

struct ModelFacts {
  std::string name;
  uint64_t weight_bytes = 0;  // what one dense decode step reads
  uint64_t parameters = 0;    // in the weight matrices
  int max_context = 0;        // the engine's
  uint64_t kv_bytes_per_token = 0;
  // weight_bytes / parameters: 4 F32, 2 F16/BF16, 1.0625 Q8_0, 0.5625 Q4_0.
  double bytes_per_parameter() const {
    return parameters ? static_cast<double>(weight_bytes) / static_cast<double>(parameters) : 0.0;
  }
};

struct ConfigFacts {
  std::string batching, kv_layout, kv_type, kv_memory, kv_offload_ram, kv_offload_dir, spec;
  std::string draft_model;  // path, when a draft model was loaded
  int kv_block_size = 0, kv_total_blocks = 0, max_batch_tokens = 0, max_seqs = 0, prefill_chunk = 0,
      spec_tokens = 0;
  bool prefix_cache = false;
};

struct StepRecord {
  double start = 0.0, seconds = 0.0;
  double forward_seconds = 0.0;  // of `seconds`, planning and the forward pass (0: not recorded)
  int sequences = 0, prefill_tokens = 0, decode_tokens = 0, padding_rows = 0, draft_tokens = 0,
      preemptions = 0, waiting = 0, running = 0;
  int32_t kv_used_blocks = 0, kv_free_blocks = 0, kv_cached_blocks = 0;
  int64_t kv_reserved_positions = 0, kv_used_positions = 0;
};

struct RequestSummary {
  double arrival = 0.0;  // seconds after the oldest request shown
  double queue = 0.0, ttft = 0.0, tpot = 0.0, e2e = 0.0;
  int prompt_tokens = 0, completion_tokens = 0, cached_prompt_tokens = 0, preemptions = 0;
  std::string finish;
  // Of the output's last tokens, how many prompt lookup would have guessed (n-gram overlap
  // with the text before them: what --spec ngram can expect accepted).
  int lookup_tokens = 0, lookup_hits = 0;
};

struct CounterFacts {
  uint64_t steps = 0, requests_submitted = 0, requests_finished = 0, requests_aborted = 0,
           requests_failed = 0, prompt_tokens = 0, computed_prompt_tokens = 0, generated_tokens = 0,
           preemptions = 0;
  int waiting = 0, running = 0;
};

struct PrefixFacts {
  bool enabled = false;
  uint64_t queries = 0, hits = 0, prompt_tokens = 0, hit_tokens = 0, evicted_blocks = 0;
  bool offload_enabled = false;
  double hit_rate() const {
    return prompt_tokens ? static_cast<double>(hit_tokens) / static_cast<double>(prompt_tokens)
                         : 0.0;
  }
};

struct SpecFacts {
  bool enabled = false;
  uint64_t verifications = 0, proposed = 0, accepted = 0, emitted = 0;
  double acceptance() const {
    return proposed ? static_cast<double>(accepted) / static_cast<double>(proposed) : 0.0;
  }
};

struct EngineState {
  int version = 1;
  ModelFacts model;
  MachineFacts machine;
  ConfigFacts config;
  CounterFacts counters;
  StepTotals step_totals;
  std::vector<StepRecord> steps;         // oldest first
  std::vector<RequestSummary> requests;  // oldest first
  PrefixFacts prefix;
  PrefixSharingStats sharing;
  std::vector<PrefixMissRecord> misses;  // oldest first
  SpecFacts spec;
  // The last prompts submitted, as text (oldest first; each cut after
  // Engine::kPromptSampleTokens tokens): the prompt lint's rules read them.
  std::vector<std::string> prompts;
  // The decode step's cost by rows, when a row sweep measured it (`rapide advise -m` runs
  // one after the workload); empty otherwise (a live server's state).
  DecodeCurve decode_curve;
};

// cores and memory now; the read bandwidth of `threads` threads when `measure_bandwidth`
// (about a second: a 1 GiB buffer read a few times; smaller ones can sit in a large L3).
MachineFacts probe_machine(int threads, bool measure_bandwidth);

EngineState capture_engine_state(const Engine& engine, const MachineFacts& machine,
                                 const std::string& draft_model = {});

nlohmann::json state_to_json(const EngineState& state);
// Throws Error(kCorrupt) naming what is missing or malformed.
EngineState state_from_json(const nlohmann::json& j);
EngineState read_state_file(const std::string& path);
void write_state_file(const std::string& path, const EngineState& state);

}  // namespace rapide::advise
