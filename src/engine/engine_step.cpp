// One engine step: plan (Scheduler::schedule), run (ModelRunner), process (OutputProcessor),
// update (Scheduler::update), and the step's timings.
#include "engine/engine.h"

#include <algorithm>
#include <cstring>

#include "base/cpu_features.h"
#include "base/error.h"
#include "base/logging.h"
#include "engine/model_identity.h"
#include "kv/memory_budget.h"

namespace rapide {

namespace {
constexpr size_t kRecentSteps = 256;
}  // namespace

void Engine::step() {
  const TimePoint start = Clock::now();
  StepPlan plan = scheduler_->schedule(start);
  fail_stalled();  // none of them is in the plan
  if (plan.empty()) {
    // Nothing fits right now (e.g. every block is pinned); wait for an abort or arrival.
    std::unique_lock<std::mutex> lock(mutex_);
    wake_.wait_for(lock, std::chrono::milliseconds(1));
    return;
  }
  {
    // Before any event of this step goes out: a client that sees its first token also
    // sees the blocks it holds.
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.kv = kv_->usage();
  }
  std::span<const float> logits;
  try {
    logits = runner_->run(plan);
  } catch (const std::exception& e) {
    spdlog::error("forward pass failed: {}", e.what());
    std::vector<FinishedRequest> failed;
    for (const ScheduledSequence& s : plan.sequences) {
      if (auto f = scheduler_->finish(s.request_id, FinishReason::kError, e.what())) {
        failed.push_back(std::move(*f));
      }
    }
    finish_outside_step(failed);
    return;
  }
  const TimePoint forwarded = Clock::now();
  const StepResult result = outputs_->process(plan, logits, *scheduler_);
  const TimePoint sampled = Clock::now();
  const std::vector<FinishedRequest> finished = scheduler_->update(plan, result, sampled);

  StepStats st;
  st.step = plan.step;
  st.start = start;
  st.seconds = seconds_between(start, Clock::now());
  st.forward_seconds = seconds_between(start, forwarded);
  st.sample_seconds = seconds_between(forwarded, sampled);
  st.sequences = static_cast<int>(plan.sequences.size());
  st.prefill_tokens = plan.prefill_tokens;
  st.decode_tokens = plan.decode_tokens;
  st.preemptions = static_cast<int>(plan.preempted.size());
  st.waiting = static_cast<int>(scheduler_->waiting_count());
  st.running = static_cast<int>(scheduler_->running_count());
  st.kv_used_blocks = kv_->used_blocks();
  st.kv_free_blocks = kv_->free_blocks();
  {
    const KvUsage usage = kv_->usage();
    st.kv_cached_blocks = usage.cached_free_blocks;
    st.kv_reserved_positions = usage.reserved_positions;
    st.kv_used_positions = usage.used_positions;
  }
  for (const ScheduledSequence& s : plan.sequences) {
    st.padding_rows += s.padding ? 1 : 0;
    st.draft_tokens += static_cast<int>(s.draft_tokens.size());
  }
  // Speculation's cost model learns from decode-only steps: a prefill chunk's many cheap
  // rows would flatten the per-row cost that verification rows actually pay.
  if (plan.prefill_tokens == 0) scheduler_->observe_step_cost(plan.decode_tokens, st.seconds);
  if (plan.decode_tokens == 0) scheduler_->observe_prefill_cost(plan.prefill_tokens, st.seconds);
  {
    // Counted before the events go out: a client that sees its final event sees its blocks
    // freed and its request counted.
    std::lock_guard<std::mutex> lock(mutex_);
    count_finished(finished);
    if (proposer_ != nullptr) {
      stats_.spec = scheduler_->spec_stats();
      stats_.spec.proposer_cached_tokens = proposer_->cached_tokens();
    }
    stats_.steps++;
    stats_.preemptions += plan.preempted.size();
    stats_.computed_prompt_tokens += static_cast<uint64_t>(plan.prefill_tokens);
    stats_.decoded_tokens += static_cast<uint64_t>(plan.decode_tokens);
    if (stats_.recent_steps.size() >= kRecentSteps) {
      stats_.recent_steps.erase(stats_.recent_steps.begin());
    }
    stats_.recent_steps.push_back(st);
    stats_.step_totals.add(st.sequences, st.prefill_tokens, st.decode_tokens, st.padding_rows,
                           st.draft_tokens, st.running, st.waiting, st.kv_free_blocks, st.seconds);
  }
  // The observer hears of a step before its clients do: whoever sees a request's final
  // event can count on every step of it having been observed.
  if (observer_) observer_(plan, result, st);
  outputs_->emit(result, finished);
  fail_stalled();  // after the step's own events
}

}  // namespace rapide
