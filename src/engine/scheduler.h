// Iteration-level scheduling (after vLLM v1's scheduler.py): each step decides which
// sequences run and how many tokens each feeds, within a token budget, a sequence cap and
// the free KV blocks. It owns every sequence: schedule() plans a step as plain data
// (engine/step.h), the engine runs it and samples, and update() applies the result. Nothing
// else appends tokens, finishes, frees or preempts a sequence.
//
//   1. Running sequences first, highest priority then oldest: a decode takes 1 token, a
//      prompt still being prefilled takes a chunk (--prefill-chunk), so long prompts are
//      split across steps and decodes keep flowing.
//   2. When blocks run out, the youngest lowest-priority running sequence is preempted:
//      its blocks are freed and it returns to the queue to be recomputed later (its tokens
//      and sampler state are kept, so its output does not change).
//   3. Waiting requests are admitted while budget, cap and blocks allow (continuous), or
//      only when nothing is running (static batching, the baseline).
//
// With a PrefixCache, admission first attaches the longest cached run of the sequence's
// blocks (RAM hits shared by reference, tier hits imported) and only the rest is prefilled.
// Computed full blocks are registered with the cache every step, and before a sequence is
// preempted or removed, so finished and preempted sequences leave their prefix behind: a
// preempted sequence usually resumes from the cache (or from the offload tier, where the
// pool spills what it evicts) instead of recomputing.
//
// Progress. Every step must move a planned sequence forward, and a live sequence must be able
// to run again; a bug that breaks this (issue 53: one accepted guess too many left a sequence
// with no token to feed, and its requests waited forever at 0 % CPU) must fail requests, not
// hang them. schedule() reports as stalled: a running sequence with no token left to feed
// (it can never be scheduled again), a planned sequence whose position did not advance in
// update(), and, after options.stall_steps consecutive plans with nothing runnable while
// requests wait or run, every live request. The engine fails them (FinishReason::kError,
// ErrorCode::kInternal) and logs why.
#pragma once

#include <algorithm>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "engine/engine_options.h"
#include "engine/engine_stats.h"
#include "engine/proposer.h"
#include "engine/sequence.h"
#include "engine/speculation.h"
#include "engine/step.h"
#include "kv/paged_kv_store.h"
#include "kv/prefix_cache.h"

namespace rapide {

class Scheduler {
 public:
  // `prefix_cache` may be null (prefix caching off), and `proposer` (speculation off); both
  // must outlive the scheduler.
  Scheduler(const EngineOptions& options, PagedKvStore& kv, PrefixCache* prefix_cache = nullptr,
            Proposer* proposer = nullptr);

  void add_waiting(std::unique_ptr<Sequence> sequence);
  // Plans the next step and reserves its KV blocks; `now` stamps first scheduling.
  StepPlan schedule(TimePoint now = Clock::now());
  // Applies what running `plan` produced: every planned sequence advances past what it fed,
  // sampled tokens are appended, and the requests the result ends finish (blocks freed, or
  // kept as padding under static batching). Returns them in result order.
  std::vector<FinishedRequest> update(const StepPlan& plan, const StepResult& result,
                                      TimePoint now = Clock::now());
  // Ends a live request outside a step (abort, a failed forward pass) and frees its blocks.
  // nullopt when the id is unknown or its request already ended (padding is freed quietly).
  std::optional<FinishedRequest> finish(RequestId id, FinishReason reason, std::string error = {},
                                        TimePoint now = Clock::now());
  // Ends every live request (shutdown).
  std::vector<FinishedRequest> finish_all(FinishReason reason, TimePoint now = Clock::now());

  // A step's measured cost (its fed positions, its seconds): speculation's cost model.
  // A decode-only step's seconds (the draft model's passes, which the draft cost model
  // accounts for, are taken out).
  void observe_step_cost(int rows, double seconds) {
    spec_.costs().observe(rows, std::max(0.0, seconds - draft_seconds_));
  }
  // The draft model's matrix parameters over the target's (its compute per row, relative).
  void set_draft_work_ratio(double ratio) { spec_.set_draft_work_ratio(ratio); }
  void observe_prefill_cost(int tokens, double seconds) {
    spec_.costs().observe_prefill(tokens, seconds);
  }
  const SpecStats& spec_stats() const { return spec_stats_; }
  // Requests found unable to progress since the last call (see "Progress" above), with why;
  // still live: the caller ends them with finish().
  struct Stalled {
    RequestId id;
    std::string why;
  };
  std::vector<Stalled> take_stalled() { return std::exchange(stalled_, {}); }
  // A sequence by request id (padding included), or null. Read-only: see update().
  const Sequence* get(RequestId id) const;
  size_t waiting_count() const { return waiting_.size(); }
  size_t running_count() const { return running_.size(); }
  // The running sequences' counts, in scheduling order (EngineStats::running_sequences).
  std::vector<RunningSequence> running_summary() const;
  bool idle() const { return waiting_.empty() && running_.empty(); }

 private:
  struct Work {  // a planned sequence while the plan is being built
    Sequence* sequence;
    int n_tokens;
    bool is_decode;
    std::vector<int32_t> drafts;  // speculative guesses fed after the decode token
    std::vector<std::vector<Candidate>> draft_distributions;  // their q, when sampled
  };

  void sort_waiting();
  // Padding gives way: its blocks are freed and its slot dropped (never re-queued).
  void drop_padding(Sequence* sequence);
  void end_batch_if_only_padding();
  void preempt(Sequence* victim, std::vector<Work>& work, StepPlan& plan, int& budget);
  // Takes a sequence's planned work back out of the step (it was preempted).
  void unplan(Sequence* s, std::vector<Work>& work, StepPlan& plan, int& budget);
  Sequence* pick_victim() const;
  int chunk_for(const Sequence& s, int budget) const;
  // Registers the sequence's computed full blocks with the prefix cache (if any).
  void register_blocks(Sequence& s);
  // Admits the front waiting sequence if room allows (prefix hit attached first); false
  // when it must wait. `promised` tracks static batching's whole-prompt promise.
  bool admit(Sequence& s, int& budget, int32_t& promised, std::vector<Work>& work, StepPlan& plan);
  // Reserves the work's positions and adds it to the plan's bookkeeping.
  void plan_work(Sequence& s, int n, bool is_decode, std::vector<Work>& work, StepPlan& plan,
                 int& budget);
  StepPlan build_plan(std::vector<Work>& work, StepPlan plan, TimePoint now);
  // Speculation for the decodes just planned, asked of the proposer at once: guesses that fit
  // the budget, the context, the request's remaining tokens and the free blocks (never
  // preempting for them).
  void propose(std::vector<Work>& work, int& budget, StepPlan& plan);
  // Frees a sequence's KV blocks, and the proposer's state for it.
  void release_kv(const Sequence& s);
  // After a verification: keeps the accepted guesses' KV, rolls back the rest.
  void settle_drafts(Sequence& s, int proposed, int accepted);
  // The request's end: its figures, and its sequence leaves (or becomes padding).
  FinishedRequest end_request(Sequence& s, FinishReason reason, std::string error, TimePoint now);
  // Frees the sequence's blocks and forgets it.
  void erase(Sequence* sequence);
  void report_stalled(const Sequence& s, std::string why);
  // Progress checks of schedule(): before planning (sequences with nothing to feed), after
  // (a run of plans with nothing runnable).
  void check_feedable();
  void check_runnable(const StepPlan& plan);
  Sequence* live(RequestId id);

  EngineOptions options_;
  PagedKvStore& kv_;
  PrefixCache* prefix_cache_;
  Proposer* proposer_;
  std::deque<std::unique_ptr<Sequence>> waiting_;
  std::vector<std::unique_ptr<Sequence>> running_;
  std::unordered_map<RequestId, Sequence*> by_id_;  // every sequence above
  bool waiting_sorted_ = true;
  uint64_t steps_ = 0;
  SpecController spec_;
  SpecStats spec_stats_;
  double draft_seconds_ = 0.0;  // the draft model's passes in this step's plan
  std::vector<Stalled> stalled_;
  int empty_plans_ = 0;  // consecutive plans with nothing runnable while not idle
};

}  // namespace rapide
