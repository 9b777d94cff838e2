// Iteration-level scheduling (after vLLM v1's scheduler.py): each step decides which
// sequences run and how many tokens each feeds, within a token budget, a sequence cap and
// the free KV blocks. It only plans; the engine runs the plan and samples.
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
#pragma once

#include <deque>
#include <memory>
#include <vector>

#include "engine/engine_options.h"
#include "engine/sequence.h"
#include "kv/paged_kv_store.h"
#include "kv/prefix_cache.h"

namespace rapide {

struct ScheduledWork {
  Sequence* sequence;
  int n_tokens;       // tokens fed this step, starting at sequence->num_computed
  bool needs_logits;  // the chunk reaches the end of the sequence's tokens
  bool is_decode;     // one token of a sequence that is generating (not prompt work)
};

struct SchedulerOutput {
  std::vector<ScheduledWork> work;
  int prefill_tokens = 0;
  int decode_tokens = 0;
  int preempted = 0;
  bool empty() const { return work.empty(); }
};

class Scheduler {
 public:
  // `prefix_cache` may be null (prefix caching off); it must outlive the scheduler.
  Scheduler(const EngineOptions& options, PagedKvStore& kv, PrefixCache* prefix_cache = nullptr);

  void add_waiting(std::unique_ptr<Sequence> sequence);
  SchedulerOutput schedule();
  // Removes a finished or aborted sequence and frees its blocks; returns it.
  std::unique_ptr<Sequence> remove(Sequence* sequence);
  // Static batching: a finished sequence stays in its slot as padding (one token per step,
  // its blocks kept) until every sequence of its batch has finished.
  void retire_to_padding(Sequence* sequence);
  Sequence* find(RequestId id);        // a live request (not padding)
  std::vector<Sequence*> all() const;  // running, then waiting

  size_t waiting_count() const { return waiting_.size(); }
  size_t running_count() const { return running_.size(); }
  bool idle() const { return waiting_.empty() && running_.empty(); }

 private:
  void sort_waiting();
  // Padding gives way: its blocks are freed and its slot dropped (never re-queued).
  void drop_padding(Sequence* sequence);
  void end_batch_if_only_padding();
  void preempt(Sequence* victim, SchedulerOutput& out, int& budget);
  Sequence* pick_victim() const;
  int chunk_for(const Sequence& s, int budget) const;
  // Registers the sequence's computed full blocks with the prefix cache (if any).
  void register_blocks(Sequence& s);
  // Admits the front waiting sequence if room allows (prefix hit attached first); false
  // when it must wait. `promised` tracks static batching's whole-prompt promise.
  bool admit(Sequence& s, int& budget, int32_t& promised, SchedulerOutput& out);

  EngineOptions options_;
  PagedKvStore& kv_;
  PrefixCache* prefix_cache_;
  std::deque<std::unique_ptr<Sequence>> waiting_;
  std::vector<std::unique_ptr<Sequence>> running_;
  bool waiting_sorted_ = true;
};

}  // namespace rapide
