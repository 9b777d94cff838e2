#include "serve/stats_log.h"

#include <nlohmann/json.hpp>

namespace rapide::serve {

std::optional<std::string> StatsLog::line(const EngineStats& now, TimePoint at, LogFormat format) {
  const double seconds = seconds_between(last_time_, at);
  const uint64_t prompt = now.computed_prompt_tokens - last_prompt_tokens_;
  const uint64_t generated = now.decoded_tokens - last_decoded_tokens_;
  last_time_ = at;
  last_prompt_tokens_ = now.computed_prompt_tokens;
  last_decoded_tokens_ = now.decoded_tokens;
  if (now.running == 0 && now.waiting == 0 && prompt == 0 && generated == 0) return std::nullopt;

  const double prompt_rate = seconds > 0 ? prompt / seconds : 0.0;
  const double generation_rate = seconds > 0 ? generated / seconds : 0.0;
  const double kv_used =
      now.kv.total_blocks > 0 ? 100.0 * now.kv.used_blocks / now.kv.total_blocks : 0.0;
  const double hit_rate = 100.0 * now.prefix_cache.hit_rate();
  if (format == LogFormat::kJson) {
    nlohmann::ordered_json fields = {{"event", "engine_stats"},
                                     {"prompt_tokens_per_s", prompt_rate},
                                     {"generation_tokens_per_s", generation_rate},
                                     {"running", now.running},
                                     {"queued", now.waiting},
                                     {"kv_used_percent", kv_used}};
    if (now.prefix_cache_enabled) fields["prefix_cache_hit_rate_percent"] = hit_rate;
    return fields.dump();
  }
  return fmt::format(
      "engine: prompt {:.1f} tok/s, generation {:.1f} tok/s, running {}, queued {}, KV {:.1f}% "
      "used, prefix-cache hit rate {}",
      prompt_rate, generation_rate, now.running, now.waiting, kv_used,
      now.prefix_cache_enabled ? fmt::format("{:.1f}%", hit_rate) : std::string("off"));
}

}  // namespace rapide::serve
