// What the engine reports about itself: per-step figures (for the advisor and metrics)
// and running totals. Snapshots are copied out under a lock; nothing here is live.
#pragma once

#include <cstdint>
#include <vector>

#include "base/clock.h"
#include "engine/prefix_miss_record.h"
#include "engine/prefix_sharing.h"
#include "engine/speculation.h"
#include "engine/step.h"
#include "engine/step_totals.h"
#include "kv/paged_kv_store.h"
#include "kv/prefix_cache.h"

namespace rapide {

struct StepStats {
  uint64_t step = 0;  // StepPlan::step
  TimePoint start;
  double seconds = 0.0;          // plan to update, the whole step
  double forward_seconds = 0.0;  // plan + forward pass
  double sample_seconds = 0.0;   // sampling, stop rules
  int sequences = 0;             // sequences in the forward pass
  int prefill_tokens = 0;        // prompt tokens computed this step
  int decode_tokens = 0;         // generated tokens fed this step
  int preemptions = 0;
  int waiting = 0;  // queue length after the step
  int running = 0;
  int32_t kv_used_blocks = 0;
  int32_t kv_free_blocks = 0;
  int32_t kv_cached_blocks = 0;       // of the free ones, still holding reusable prefixes
  int64_t kv_reserved_positions = 0;  // slots the running sequences' blocks hold
  int64_t kv_used_positions = 0;      // of those, filled (the rest is fragmentation)
  int padding_rows = 0;               // static batching's rows of finished requests
  int draft_tokens = 0;               // speculative guesses verified this step
};

// One running sequence, as llama-server's /slots shows a busy slot: counts only, no text.
struct RunningSequence {
  RequestId request_id = 0;
  int prompt_tokens = 0;
  int generated = 0;      // tokens generated so far
  int max_generated = 0;  // max_tokens, clipped to the context
};

struct EngineStats {
  uint64_t steps = 0;
  uint64_t requests_submitted = 0;
  uint64_t requests_finished = 0;  // stop or length
  uint64_t requests_aborted = 0;
  uint64_t requests_failed = 0;
  uint64_t prompt_tokens = 0;           // of finished requests
  uint64_t computed_prompt_tokens = 0;  // prompt positions actually run (recomputes included)
  uint64_t generated_tokens = 0;
  uint64_t decoded_tokens = 0;  // tokens fed to decode steps so far (running requests too)
  uint64_t preemptions = 0;
  int waiting = 0;
  int running = 0;
  std::vector<RunningSequence> running_sequences;  // after the last step, in scheduling order
  int background_tasks = 0;  // between-steps tasks not yet over (engine/background_task.h)
  KvUsage kv;
  std::vector<StepStats> recent_steps;           // the last steps, oldest first
  StepTotals step_totals;                        // every step since the start, by kind
  std::vector<FinishedRequest> recent_requests;  // the last requests that ended, oldest first
  // What an ideal prefix cache could serve of the prompts (measured with the cache off too).
  PrefixSharingStats prefix_sharing;
  // Prefix cache and offload tier counters (all zero when --prefix-cache off), and the
  // latest requests that reused less of a cached prefix than they could have.
  bool prefix_cache_enabled = false;
  PrefixCacheStats prefix_cache;
  std::vector<PrefixMissRecord> recent_misses;  // oldest first
  // Speculative decoding (all zero when --spec off).
  bool spec_enabled = false;
  SpecStats spec;
};

}  // namespace rapide
