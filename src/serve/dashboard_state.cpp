#include "serve/dashboard_state.h"

namespace rapide::serve {

using nlohmann::json;

namespace {

json percentiles_json(const std::optional<LatencyPercentiles>& p) {
  if (!p) return nullptr;
  return {{"p50", p->p50}, {"p90", p->p90}, {"p99", p->p99}, {"count", p->count}};
}

// Steps that started in the window: how many per second and their mean prefill and decode
// rows (tokens in the forward pass), so the chart shows the batch filling.
json steps_json(const EngineStats& e, TimePoint now, double window) {
  uint64_t steps = 0, prefill = 0, decode = 0;
  for (const StepStats& s : e.recent_steps) {
    if (seconds_between(s.start, now) > window) continue;
    steps++;
    prefill += static_cast<uint64_t>(s.prefill_tokens);
    decode += static_cast<uint64_t>(s.decode_tokens);
  }
  const double n = static_cast<double>(steps);
  return {{"count", e.steps},
          {"per_second", n / window},
          {"prefill_rows", steps ? static_cast<double>(prefill) / n : 0.0},
          {"decode_rows", steps ? static_cast<double>(decode) / n : 0.0}};
}

json near_misses_json(const std::vector<PrefixMissRecord>& misses) {
  json out = json::array();
  for (auto it = misses.rbegin(); it != misses.rend() && out.size() < kDashboardNearMisses; ++it) {
    out.push_back({{"request_id", it->request_id},
                   {"prompt_tokens", it->prompt_tokens},
                   {"matched_tokens", it->matched_tokens},
                   {"reused_tokens", it->reused_tokens},
                   {"same_characters", it->same_characters},
                   {"before", it->before},
                   {"prompt", it->prompt_text},
                   {"cached", it->cached_text},
                   {"summary", it->summary}});
  }
  return out;
}

json offload_json(const PrefixCacheStats& p) {
  const OffloadStats& o = p.offload;
  return {{"enabled", p.offload_enabled},    {"ram_blocks", o.ram_blocks},
          {"ram_bytes", o.ram_used_bytes},   {"disk_blocks", o.disk_blocks},
          {"disk_bytes", o.disk_used_bytes}, {"stored_blocks", o.stored_blocks},
          {"loaded_blocks", o.loaded_blocks}};
}

}  // namespace

json dashboard_state(const DashboardInputs& in) {
  json out = {{"time", in.time}, {"state", in.state}, {"model", in.model}, {"window", in.window}};
  if (!in.engine) return out;
  const EngineStats& e = *in.engine;
  out["latency"] = {{"ttft", percentiles_json(in.latency.ttft)},
                    {"tpot", percentiles_json(in.latency.tpot)},
                    {"itl", percentiles_json(in.latency.itl)}};
  out["tokens"] = {{"prompt_computed", e.computed_prompt_tokens}, {"decoded", e.decoded_tokens}};
  out["requests"] = {{"running", e.running},
                     {"waiting", e.waiting},
                     {"finished", e.requests_finished},
                     {"aborted", e.requests_aborted},
                     {"failed", e.requests_failed}};
  out["steps"] = steps_json(e, in.now, in.window);
  out["kv"] = {{"total", e.kv.total_blocks},
               {"used", e.kv.used_blocks},
               {"free", e.kv.free_blocks},
               {"cached", e.kv.cached_free_blocks}};
  const PrefixCacheStats& p = e.prefix_cache;
  out["offload"] = offload_json(p);
  out["prefix_cache"] = {{"enabled", e.prefix_cache_enabled},
                         {"hit_rate", p.hit_rate()},
                         {"queries", p.queries},
                         {"hits", p.hits},
                         {"hit_tokens", p.ram_hit_tokens + p.tier_hit_tokens},
                         {"prompt_tokens", p.prompt_tokens},
                         {"near_misses", near_misses_json(e.recent_misses)}};
  out["preemptions"] = e.preemptions;
  out["speculative"] = {{"enabled", e.spec_enabled},
                        {"acceptance", e.spec.acceptance_rate()},
                        {"mean_accepted", e.spec.mean_accepted()},
                        {"proposed", e.spec.proposed},
                        {"accepted", e.spec.accepted},
                        {"k", e.spec.last_k}};
  out["advice"] = in.advice;
  return out;
}

}  // namespace rapide::serve
