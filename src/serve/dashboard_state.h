// GET /dashboard/state: one JSON snapshot of everything the live dashboard draws, polled by
// the page about once a second.
//
// Built from plain data only: an EngineStats copy (Engine::stats(), the same short lock a
// /metrics scrape takes), the metrics' recent latency percentiles, and the advisor's cached
// findings, so a poll never waits on the engine thread and never makes it wait long.
//
// Counters are cumulative (tokens in and out, preemptions, prefix-cache tokens) and come with
// `time`, seconds on the server's monotonic clock: the page turns two polls into rates, so
// the server keeps no per-viewer history. Windowed figures (latency percentiles, rows per
// step) cover the last `window` seconds.
//
//   {"time", "state", "model", "window",
//    "latency": {"ttft"|"tpot"|"itl": {"p50","p90","p99","count"} | null},   seconds
//    "tokens": {"prompt_computed", "decoded"},  cumulative
//    "requests": {"running", "waiting", "finished", "aborted", "failed"},
//    "steps": {"count", "per_second", "prefill_rows", "decode_rows"},  rows: mean per step
//    "kv": {"total", "used", "free", "cached"},  blocks
//    "offload": {"enabled", "ram_blocks", "ram_bytes", "disk_blocks", "disk_bytes", ...},
//    "prefix_cache": {"enabled", "hit_rate", "queries", "hits", "hit_tokens", "prompt_tokens",
//                     "near_misses": [{"request_id", "prompt_tokens", "matched_tokens",
//                                      "reused_tokens", "before", "prompt", "cached",
//                                      "summary"}]},  newest first
//    "preemptions",
//    "speculative": {"enabled", "acceptance", "mean_accepted", "proposed", "accepted", "k"},
//    "advice": advice_to_json | null}
// While the model loads only time, state and model are set.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "engine/engine_stats.h"
#include "serve/metrics.h"

namespace rapide::serve {

struct DashboardInputs {
  double time = 0.0;  // seconds, monotonic
  std::string state;  // loading, ready, draining
  std::string model;
  double window = 5.0;                  // seconds the windowed figures cover
  const EngineStats* engine = nullptr;  // null while loading
  TimePoint now;                        // when `engine` was captured
  RecentLatency latency;
  nlohmann::json advice;  // null: not computed yet
};

// The newest near-miss records sent (the engine keeps a few more).
inline constexpr size_t kDashboardNearMisses = 5;

nlohmann::json dashboard_state(const DashboardInputs& in);

}  // namespace rapide::serve
