// The periodic line a busy server logs (like vLLM's "Avg prompt throughput ..."): prompt and
// generation tokens per second since the last line, sequences running and queued, KV-cache
// use and the prefix-cache hit rate. Nothing is logged while the engine is idle, so a
// quiet server's log stays quiet.
#pragma once

#include <optional>
#include <string>

#include "base/clock.h"
#include "base/logging.h"
#include "engine/engine_stats.h"

namespace rapide::serve {

class StatsLog {
 public:
  // Counts from `start`, when the engine's counters were zero: work done before the first
  // line is in it (a first call that only set a baseline would drop a burst that ended
  // before the first tick).
  explicit StatsLog(TimePoint start = Clock::now()) : last_time_(start) {}

  // The line for the interval since the previous call (or the start), or nothing when the
  // engine had no work in it (no sequence running or queued now, no token computed since).
  std::optional<std::string> line(const EngineStats& now, TimePoint at, LogFormat format);

 private:
  TimePoint last_time_;
  uint64_t last_prompt_tokens_ = 0;
  uint64_t last_decoded_tokens_ = 0;
};

}  // namespace rapide::serve
