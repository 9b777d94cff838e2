// Running totals of every step since the engine started, by kind of step. The ring of recent
// steps (EngineStats::recent_steps) shows the last few hundred; these cover the whole run,
// so the advisor's averages do not depend on how long ago a workload's bursts happened.
// A step is one of:
//   decode-only  every fed row is a generated token (or its draft guesses)
//   prefill-only only prompt work
//   mixed        prompt chunks and decodes in one forward pass (prefill stalls streams)
#pragma once

#include <algorithm>
#include <cstdint>

namespace rapide {

struct StepKindTotals {
  uint64_t steps = 0;
  uint64_t rows = 0;            // sequences in the forward passes
  uint64_t prefill_tokens = 0;  // prompt tokens computed
  uint64_t decode_tokens = 0;   // generated tokens fed (drafts excluded)
  double seconds = 0.0;
  double max_seconds = 0.0;

  void add(int sequences, int prefill, int decode, double step_seconds) {
    steps++;
    rows += static_cast<uint64_t>(sequences);
    prefill_tokens += static_cast<uint64_t>(prefill);
    decode_tokens += static_cast<uint64_t>(decode);
    seconds += step_seconds;
    max_seconds = std::max(max_seconds, step_seconds);
  }
  double mean_seconds() const { return steps ? seconds / static_cast<double>(steps) : 0.0; }
  double mean_rows() const {
    return steps ? static_cast<double>(rows) / static_cast<double>(steps) : 0.0;
  }
};

struct StepTotals {
  StepKindTotals decode_only, prefill_only, mixed;
  uint64_t padding_rows = 0;     // static batching's finished-but-computed rows
  uint64_t draft_tokens = 0;     // speculative guesses verified
  int max_running = 0;           // the most sequences running after a step
  int max_waiting = 0;           // the longest queue after a step
  int32_t min_free_blocks = -1;  // the fewest free KV blocks after a step (-1: no step yet)

  void add(int sequences, int prefill, int decode, int padding, int drafts, int running,
           int waiting, int32_t free_blocks, double step_seconds) {
    StepKindTotals& kind = prefill == 0 ? decode_only : (decode == 0 ? prefill_only : mixed);
    kind.add(sequences, prefill, decode, step_seconds);
    padding_rows += static_cast<uint64_t>(padding);
    draft_tokens += static_cast<uint64_t>(drafts);
    max_running = std::max(max_running, running);
    max_waiting = std::max(max_waiting, waiting);
    min_free_blocks = min_free_blocks < 0 ? free_blocks : std::min(min_free_blocks, free_blocks);
  }
};

}  // namespace rapide
