#include "advise/engine_state.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "base/cpu_features.h"
#include "base/error.h"
#include "base/thread_pool.h"
#include "kernels/bandwidth.h"
#include "kernels/kv_rows.h"
#include "kv/kv_store.h"
#include "kv/memory_budget.h"

// Field lists for the JSON form (nlohmann's macros: missing fields keep their defaults, so a
// state written by an older rapide still reads).
namespace rapide {
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(StepKindTotals, steps, rows, prefill_tokens,
                                                decode_tokens, seconds, max_seconds)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(StepTotals, decode_only, prefill_only, mixed,
                                                padding_rows, draft_tokens, max_running,
                                                max_waiting, min_free_blocks)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(PrefixSharingStats, prompts, prompt_tokens,
                                                shareable_tokens, sharing_prompts, recurring_blocks)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(PrefixMissRecord, request_id, prompt_tokens,
                                                reused_tokens, matched_tokens, divergent_position,
                                                same_characters, before, prompt_text, cached_text,
                                                realigned, prompt_value, cached_value, summary)
}  // namespace rapide

namespace rapide::advise {

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(MachineFacts, cores, threads, memory_total,
                                                memory_available, read_bandwidth, last_level_cache)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(ModelFacts, name, weight_bytes, parameters,
                                                max_context, kv_bytes_per_token)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(ConfigFacts, batching, kv_layout, kv_type,
                                                kv_memory, kv_offload_ram, kv_offload_dir, spec,
                                                draft_model, kv_block_size, kv_total_blocks,
                                                max_batch_tokens, max_seqs, prefill_chunk,
                                                spec_tokens, prefix_cache)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(StepRecord, start, seconds, forward_seconds,
                                                sequences, prefill_tokens, decode_tokens,
                                                padding_rows, draft_tokens, preemptions, waiting,
                                                running, kv_used_blocks, kv_free_blocks,
                                                kv_cached_blocks, kv_reserved_positions,
                                                kv_used_positions)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(RequestSummary, arrival, queue, ttft, tpot, e2e,
                                                prompt_tokens, completion_tokens,
                                                cached_prompt_tokens, preemptions, lookup_tokens,
                                                lookup_hits, finish)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(CounterFacts, steps, requests_submitted,
                                                requests_finished, requests_aborted,
                                                requests_failed, prompt_tokens,
                                                computed_prompt_tokens, generated_tokens,
                                                preemptions, waiting, running)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(PrefixFacts, enabled, queries, hits, prompt_tokens,
                                                hit_tokens, evicted_blocks, offload_enabled)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(SpecFacts, enabled, verifications, proposed,
                                                accepted, emitted)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(DecodeCurvePoint, rows, seconds)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(DecodeCurve, context, points)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(EngineState, version, model, machine, config,
                                                counters, step_totals, steps, requests, prefix,
                                                sharing, misses, spec, prompts, decode_curve)

MachineFacts probe_machine(int threads, bool measure_bandwidth) {
  MachineFacts m;
  m.cores = physical_core_count();
  m.threads = threads > 0 ? threads : m.cores;
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page_size > 0) m.memory_total = static_cast<uint64_t>(pages) * page_size;
  const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
  const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
  // A VM may report a whole socket's L3 (384 MiB on a Zen 4 EPYC) while one core reaches
  // only its chiplet's 32 MiB: the smaller figure is the one decode sees.
  m.last_level_cache =
      std::min<uint64_t>(static_cast<uint64_t>(std::max({l3, l2, 0L})), 32ull << 20);
  try {
    m.memory_available = mem_available_bytes();
  } catch (const Error&) {
    m.memory_available = 0;  // unknown: the memory questions then say so
  }
  if (measure_bandwidth) {
    ThreadPool pool(std::max(1, m.threads));
    m.read_bandwidth = measure_read_bandwidth(pool);  // 1 GiB: beyond any L3 a VM reports
  }
  return m;
}

EngineState capture_engine_state(const Engine& engine, const MachineFacts& machine,
                                 const std::string& draft_model) {
  const EngineStats stats = engine.stats();
  const EngineOptions& o = engine.options();
  EngineState s;
  s.machine = machine;
  s.model.name = engine.config().name;
  s.model.weight_bytes = engine.weight_bytes();
  s.model.parameters = engine.matmul_parameters();
  s.model.max_context = engine.max_context();
  s.model.kv_bytes_per_token =
      KvLayout::for_model(engine.config(), o.kv_block_size, o.kv_type).block_bytes() /
      static_cast<uint64_t>(o.kv_block_size);

  ConfigFacts& c = s.config;
  c.batching = batching_mode_name(o.batching);
  c.kv_layout = kv_layout_mode_name(o.kv_layout);
  c.kv_type = kv_type_name(o.kv_type);
  c.kv_memory = o.kv_memory;
  c.kv_offload_ram = o.kv_offload_ram;
  c.kv_offload_dir = o.kv_offload_dir;
  c.spec = spec_mode_name(o.spec.mode);
  c.draft_model = draft_model;
  c.kv_block_size = o.kv_block_size;
  c.kv_total_blocks = stats.kv.total_blocks;
  c.max_batch_tokens = o.max_batch_tokens;
  c.max_seqs = o.max_seqs;
  c.prefill_chunk = o.prefill_chunk;
  c.spec_tokens = o.spec.tokens;
  c.prefix_cache = o.prefix_cache && o.kv_layout == KvLayoutMode::kPaged;

  CounterFacts& n = s.counters;
  n.steps = stats.steps;
  n.requests_submitted = stats.requests_submitted;
  n.requests_finished = stats.requests_finished;
  n.requests_aborted = stats.requests_aborted;
  n.requests_failed = stats.requests_failed;
  n.prompt_tokens = stats.prompt_tokens;
  n.computed_prompt_tokens = stats.computed_prompt_tokens;
  n.generated_tokens = stats.generated_tokens;
  n.preemptions = stats.preemptions;
  n.waiting = stats.waiting;
  n.running = stats.running;
  s.step_totals = stats.step_totals;

  const TimePoint first_step =
      stats.recent_steps.empty() ? TimePoint{} : stats.recent_steps.front().start;
  for (const StepStats& st : stats.recent_steps) {
    StepRecord r;
    r.start = seconds_between(first_step, st.start);
    r.seconds = st.seconds;
    r.forward_seconds = st.forward_seconds;
    r.sequences = st.sequences;
    r.prefill_tokens = st.prefill_tokens;
    r.decode_tokens = st.decode_tokens;
    r.padding_rows = st.padding_rows;
    r.draft_tokens = st.draft_tokens;
    r.preemptions = st.preemptions;
    r.waiting = st.waiting;
    r.running = st.running;
    r.kv_used_blocks = st.kv_used_blocks;
    r.kv_free_blocks = st.kv_free_blocks;
    r.kv_cached_blocks = st.kv_cached_blocks;
    r.kv_reserved_positions = st.kv_reserved_positions;
    r.kv_used_positions = st.kv_used_positions;
    s.steps.push_back(r);
  }
  TimePoint first_arrival{};
  for (const FinishedRequest& f : stats.recent_requests) {
    if (first_arrival == TimePoint{} || f.timings.arrival < first_arrival) {
      first_arrival = f.timings.arrival;
    }
  }
  for (const FinishedRequest& f : stats.recent_requests) {
    const RequestMetrics m = request_metrics(f.timings, f.completion_tokens);
    RequestSummary r;
    r.arrival = seconds_between(first_arrival, f.timings.arrival);
    r.queue = m.queue_seconds;
    r.ttft = m.ttft_seconds;
    r.tpot = m.tpot_seconds;
    r.e2e = m.e2e_seconds;
    r.prompt_tokens = f.prompt_tokens;
    r.completion_tokens = f.completion_tokens;
    r.cached_prompt_tokens = f.cached_prompt_tokens;
    r.preemptions = f.preemptions;
    r.lookup_tokens = f.lookup_tokens;
    r.lookup_hits = f.lookup_hits;
    r.finish = finish_reason_name(f.reason);
    s.requests.push_back(r);
  }
  s.prefix.enabled = stats.prefix_cache_enabled;
  s.prefix.queries = stats.prefix_cache.queries;
  s.prefix.hits = stats.prefix_cache.hits;
  s.prefix.prompt_tokens = stats.prefix_cache.prompt_tokens;
  s.prefix.hit_tokens = stats.prefix_cache.ram_hit_tokens + stats.prefix_cache.tier_hit_tokens;
  s.prefix.evicted_blocks = stats.prefix_cache.evicted_blocks;
  s.prefix.offload_enabled = stats.prefix_cache.offload_enabled;
  s.sharing = stats.prefix_sharing;
  s.misses = stats.recent_misses;
  s.spec.enabled = stats.spec_enabled;
  s.spec.verifications = stats.spec.verifications;
  s.spec.proposed = stats.spec.proposed;
  s.spec.accepted = stats.spec.accepted;
  s.spec.emitted = stats.spec.emitted;
  for (const std::vector<int32_t>& prompt : engine.recent_prompts()) {
    s.prompts.push_back(engine.tokenizer().decode(prompt));
  }
  return s;
}

nlohmann::json state_to_json(const EngineState& state) {
  nlohmann::json j = state;
  j["kind"] = "rapide.engine_state";
  return j;
}

EngineState state_from_json(const nlohmann::json& j) {
  if (!j.is_object() || j.value("kind", "") != "rapide.engine_state") {
    fail(ErrorCode::kCorrupt,
         "not an engine state (no \"kind\": \"rapide.engine_state\"; write one with "
         "`rapide bench --engine --state FILE` or GET /v1/engine/state)");
  }
  try {
    return j.get<EngineState>();
  } catch (const nlohmann::json::exception& e) {
    fail(ErrorCode::kCorrupt, "malformed engine state: {}", e.what());
  }
}

EngineState read_state_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail(ErrorCode::kNotFound, "cannot open '{}'", path);
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded()) fail(ErrorCode::kCorrupt, "'{}' is not JSON", path);
  return state_from_json(j);
}

void write_state_file(const std::string& path, const EngineState& state) {
  std::ofstream out(path);
  if (!out) fail(ErrorCode::kNotFound, "cannot write '{}'", path);
  out << state_to_json(state).dump(1) << '\n';
  if (!out) fail(ErrorCode::kInternal, "writing '{}' failed", path);
}

}  // namespace rapide::advise
