#include "engine/scheduler.h"

#include <algorithm>

#include "base/error.h"

namespace rapide {

namespace {

// Highest priority first, then first come first served.
bool runs_before(const Sequence& a, const Sequence& b) {
  if (a.priority != b.priority) return a.priority > b.priority;
  return a.arrival_order < b.arrival_order;
}

}  // namespace

Scheduler::Scheduler(const EngineOptions& options, PagedKvStore& kv, PrefixCache* prefix_cache,
                     Proposer* proposer)
    : options_(options),
      kv_(kv),
      prefix_cache_(prefix_cache),
      proposer_(proposer),
      spec_(options.spec) {
  if (proposer_ != nullptr) spec_.set_costly_proposer(proposer_->costly());
  spec_stats_.accepted_histogram.assign(static_cast<size_t>(options.spec.max_tokens) + 1, 0);
  if (options.spec.tokens > options.spec.max_tokens) {
    spec_stats_.accepted_histogram.assign(static_cast<size_t>(options.spec.tokens) + 1, 0);
  }
}

void Scheduler::register_blocks(Sequence& s) {
  if (prefix_cache_ == nullptr) return;
  prefix_cache_->extend_hashes(s.tokens, s.block_hashes, s.prefix_chain);
  prefix_cache_->cache_blocks(s.kv_id, s.block_hashes, s.num_computed, s.tokens,
                              &s.registered_blocks, s.prefix_chain);
}

void Scheduler::add_waiting(std::unique_ptr<Sequence> sequence) {
  sequence->status = SequenceStatus::kWaiting;
  by_id_[sequence->id] = sequence.get();
  waiting_.push_back(std::move(sequence));
  waiting_sorted_ = false;
}

void Scheduler::sort_waiting() {
  if (waiting_sorted_) return;
  std::stable_sort(waiting_.begin(), waiting_.end(),
                   [](const auto& a, const auto& b) { return runs_before(*a, *b); });
  waiting_sorted_ = true;
}

int Scheduler::chunk_for(const Sequence& s, int budget) const {
  int n = s.uncomputed();
  if (n > 1) n = std::min(n, options_.prefill_chunk);
  return std::max(0, std::min(n, budget));
}

Sequence* Scheduler::pick_victim() const {
  Sequence* victim = nullptr;
  for (const auto& s : running_) {
    if (s->status != SequenceStatus::kRunning) continue;
    if (s->padding) return s.get();  // padding gives way before any live request
    if (victim == nullptr || runs_before(*victim, *s)) victim = s.get();
  }
  return victim;
}

void Scheduler::drop_padding(Sequence* sequence) {
  release_kv(*sequence);
  sequence->status = SequenceStatus::kFinished;
}

void Scheduler::end_batch_if_only_padding() {
  if (running_.empty()) return;
  for (const auto& s : running_) {
    if (!s->padding) return;
  }
  for (const auto& s : running_) {
    release_kv(*s);
    by_id_.erase(s->id);
  }
  running_.clear();
}

void Scheduler::unplan(Sequence* s, std::vector<Work>& work, StepPlan& plan, int& budget) {
  for (auto it = work.begin(); it != work.end(); ++it) {
    if (it->sequence != s) continue;
    budget += it->n_tokens;
    (it->is_decode ? plan.decode_tokens : plan.prefill_tokens) -= it->n_tokens;
    work.erase(it);
    return;
  }
}

void Scheduler::preempt(Sequence* victim, std::vector<Work>& work, StepPlan& plan, int& budget) {
  unplan(victim, work, plan, budget);
  if (victim->padding) {
    drop_padding(victim);
    return;
  }
  register_blocks(*victim);  // its full blocks stay cached: re-admission reuses them
  release_kv(*victim);
  victim->num_computed = 0;
  victim->registered_blocks = 0;
  victim->status = SequenceStatus::kWaiting;
  victim->preemptions++;
  plan.preempted.push_back(victim->id);
}

void Scheduler::plan_work(Sequence& s, int n, bool is_decode, std::vector<Work>& work,
                          StepPlan& plan, int& budget) {
  kv_.reserve(s.kv_id, s.num_computed + n);
  work.push_back({&s, n, is_decode, {}, {}});
  (is_decode ? plan.decode_tokens : plan.prefill_tokens) += n;
  budget -= n;
}

StepPlan Scheduler::schedule(TimePoint now) {
  StepPlan plan;
  plan.step = ++steps_;
  draft_seconds_ = 0.0;
  std::vector<Work> work;
  int budget = options_.max_batch_tokens;
  end_batch_if_only_padding();
  std::stable_sort(running_.begin(), running_.end(),
                   [](const auto& a, const auto& b) { return runs_before(*a, *b); });
  for (auto& s : running_) {
    if (!s->padding) register_blocks(*s);  // a padded row's tokens are no prefix anyone sends
    // After registering: a block that leaves the window stays cached for the next prompt.
    kv_.free_outside_window(s->kv_id, s->num_computed);
  }
  check_feedable();

  // Decodes first (one token each, what TPOT depends on), then prefill chunks.
  for (int pass = 0; pass < 2; ++pass) {
    const bool decode_pass = pass == 0;
    for (size_t i = 0; i < running_.size() && budget > 0; ++i) {
      Sequence* s = running_[i].get();
      if (s->status != SequenceStatus::kRunning || s->is_prefilling() == decode_pass) continue;
      const int n = chunk_for(*s, budget);
      if (n == 0) continue;
      if (s->padding && s->num_computed + n > kv_.max_context()) {
        drop_padding(s);  // a padded row ends at the context limit
        continue;
      }
      bool fits = kv_.can_reserve(s->kv_id, s->num_computed + n);
      while (!fits) {
        Sequence* victim = pick_victim();
        preempt(victim, work, plan, budget);
        if (victim == s) break;
        fits = kv_.can_reserve(s->kv_id, s->num_computed + n);
      }
      if (!fits) continue;
      plan_work(*s, n, decode_pass, work, plan, budget);
    }
  }

  // Speculation last: guesses only take what the plain work left of the budget and blocks.
  if (proposer_ != nullptr) propose(work, budget, plan);

  // Preempted sequences go back to the queue (ahead of newer arrivals by their order);
  // dropped padding just goes.
  for (auto it = running_.begin(); it != running_.end();) {
    if ((*it)->status == SequenceStatus::kFinished) {
      by_id_.erase((*it)->id);
      it = running_.erase(it);
    } else if ((*it)->status == SequenceStatus::kWaiting) {
      waiting_.push_back(std::move(*it));
      waiting_sorted_ = false;
      it = running_.erase(it);
    } else {
      ++it;
    }
  }

  // Admission. Continuous: whenever there is room and nothing was just preempted (admitting
  // then would only thrash). Static: only into an empty engine, a whole batch at once.
  const bool continuous = options_.batching == BatchingMode::kContinuous;
  const bool admitting = continuous ? plan.preempted.empty() : running_.empty();
  if (admitting) {
    sort_waiting();
    int32_t promised_blocks = 0;  // static mode: blocks the admitted prompts will need
    while (!waiting_.empty() && static_cast<int>(running_.size()) < options_.max_seqs) {
      Sequence* s = waiting_.front().get();
      if (!admit(*s, budget, promised_blocks, work, plan)) break;
      s->status = SequenceStatus::kRunning;
      running_.push_back(std::move(waiting_.front()));
      waiting_.pop_front();
    }
  }
  StepPlan built = build_plan(work, std::move(plan), now);
  check_runnable(built);
  return built;
}

void Scheduler::report_stalled(const Sequence& s, std::string why) {
  for (const Stalled& known : stalled_) {
    if (known.id == s.id) return;
  }
  stalled_.push_back({s.id, std::move(why)});
}

void Scheduler::check_feedable() {
  for (const auto& s : running_) {
    if (s->status != SequenceStatus::kRunning || s->uncomputed() >= 1) continue;
    // A running sequence always has its last sampled token (or the rest of its prompt) to
    // feed; without one, chunk_for() gives it nothing in every step from now on.
    report_stalled(*s, fmt::format("no token left to feed ({} positions computed of {} tokens): "
                                   "it can never run again",
                                   s->num_computed, s->tokens.size()));
  }
}

void Scheduler::check_runnable(const StepPlan& plan) {
  if (!plan.empty() || idle()) {
    empty_plans_ = 0;
    return;
  }
  if (++empty_plans_ < options_.stall_steps) return;
  // Nothing could run for stall_steps plans in a row: only an abort changes that, and none
  // came. Everyone live is stuck behind whatever cannot run.
  const std::string why = fmt::format(
      "nothing could run for {} consecutive steps ({} running, {} waiting, {} free KV "
      "blocks)",
      empty_plans_, running_.size(), waiting_.size(), kv_.free_blocks());
  for (const auto& s : running_) report_stalled(*s, why);
  for (const auto& s : waiting_) report_stalled(*s, why);
  empty_plans_ = 0;
}

StepPlan Scheduler::build_plan(std::vector<Work>& work, StepPlan plan, TimePoint now) {
  // An empty plan runs nothing: its moves wait for the next plan that does.
  if (!work.empty()) plan.kv_ops = kv_.take_ops();
  plan.sequences.reserve(work.size());
  for (Work& w : work) {
    Sequence& s = *w.sequence;
    if (s.timings.first_scheduled == TimePoint{}) s.timings.first_scheduled = now;
    ScheduledSequence out;
    out.request_id = s.id;
    out.kv_id = s.kv_id;
    out.start_position = s.num_computed;
    out.tokens.assign(s.tokens.begin() + s.num_computed,
                      s.tokens.begin() + s.num_computed + w.n_tokens);
    // Logits are due once the chunk reaches the end of the sequence's tokens.
    out.logits_rows = s.num_computed + w.n_tokens == static_cast<int>(s.tokens.size()) ? 1 : 0;
    out.draft_tokens = w.drafts;
    out.draft_distributions = std::move(w.draft_distributions);  // k x vocab: not copied
    if (!w.drafts.empty()) out.logits_rows += static_cast<int32_t>(w.drafts.size());
    const std::span<const int32_t> table = kv_.block_table(s.kv_id);
    out.block_table.assign(table.begin(), table.end());
    out.is_decode = w.is_decode;
    out.adapter = s.adapter;
    out.padding = s.padding;
    plan.sequences.push_back(std::move(out));
  }
  return plan;
}

void Scheduler::propose(std::vector<Work>& work, int& budget, StepPlan& plan) {
  int decoding = 0;
  for (const Work& w : work) decoding += w.is_decode && !w.sequence->padding;
  std::vector<ProposalRequest> requests;
  std::vector<Work*> owners;
  for (Work& w : work) {
    if (!w.is_decode || w.sequence->padding || w.sequence->constrained) continue;
    Sequence& s = *w.sequence;
    if (s.spec.mode == SpecMode::kOff) continue;  // the request turned speculation off
    const int tokens = s.spec.tokens.value_or(options_.spec.tokens);
    const SpecDecision d = spec_.choose(s.id, decoding, tokens);
    spec_stats_.last_k = d.k;
    spec_stats_.last_predicted_speedup = d.predicted_speedup;
    if (d.k == 0) {
      if (tokens < 0) spec_stats_.off_decisions++;
      continue;
    }
    // The decode token and its guesses must stay within the context and the request: the
    // last guess is worth feeding only if a token can still follow it.
    const int fed_end = s.num_computed + w.n_tokens;
    const int remaining = s.max_generated - s.generated();
    const int k = std::min({d.k, budget, kv_.max_context() - fed_end, remaining - 1});
    if (k <= 0) continue;
    requests.push_back({s.id, s.kv_id, s.tokens, k, s.draft_sampler.get(), s.generated(), {}, {}});
    owners.push_back(&w);
  }
  if (requests.empty()) return;
  proposer_->propose(requests);
  for (const auto& [rows, seconds] : proposer_->last_passes()) {
    spec_.draft_costs().observe(rows, seconds);
    draft_seconds_ += seconds;
  }
  for (size_t i = 0; i < requests.size(); ++i) {
    Work& w = *owners[i];
    Sequence& s = *w.sequence;
    std::vector<int32_t>& drafts = requests[i].guesses;
    if (drafts.empty() && proposer_->costly()) spec_.observe(s.id, 1, 0);
    const int fed_end = s.num_computed + w.n_tokens;
    if (static_cast<int>(drafts.size()) > budget) drafts.resize(static_cast<size_t>(budget));
    while (!drafts.empty() &&
           !kv_.can_reserve(s.kv_id, fed_end + static_cast<int>(drafts.size()))) {
      drafts.pop_back();  // guesses never preempt anyone
    }
    if (drafts.empty()) continue;
    const int n = static_cast<int>(drafts.size());
    kv_.reserve(s.kv_id, fed_end + n);
    plan.decode_tokens += n;
    budget -= n;
    w.drafts = std::move(drafts);
    std::vector<std::vector<Candidate>>& q = requests[i].distributions;
    if (q.size() > w.drafts.size()) q.resize(w.drafts.size());
    w.draft_distributions = std::move(q);
  }
}

void Scheduler::settle_drafts(Sequence& s, int proposed, int accepted) {
  s.num_computed += accepted;
  kv_.truncate(s.kv_id, s.num_computed);  // rejected guesses leave no KV behind
  proposer_->rollback(s.kv_id, s.num_computed);
  spec_.observe(s.id, proposed, accepted);
  spec_stats_.verifications++;
  spec_stats_.proposed += static_cast<uint64_t>(proposed);
  spec_stats_.accepted += static_cast<uint64_t>(accepted);
  spec_stats_.emitted += static_cast<uint64_t>(accepted) + 1;
  if (static_cast<size_t>(accepted) < spec_stats_.accepted_histogram.size()) {
    spec_stats_.accepted_histogram[static_cast<size_t>(accepted)]++;
  }
}

bool Scheduler::admit(Sequence& s, int& budget, int32_t& promised, std::vector<Work>& work,
                      StepPlan& plan) {
  const bool continuous = options_.batching == BatchingMode::kContinuous;
  const int length = static_cast<int>(s.tokens.size());
  const int bs = kv_.block_size();
  PrefixMatch hit;
  if (prefix_cache_ != nullptr && s.num_computed == 0) {
    prefix_cache_->extend_hashes(s.tokens, s.block_hashes, s.prefix_chain);
    hit = prefix_cache_->match(s.tokens, s.block_hashes, s.prefix_chain);
  }
  const int cached = hit.blocks() * bs;
  // The first chunk after the cached prefix, as chunk_for will cut it.
  const int rest = length - cached;
  const int n =
      std::max(0, std::min(rest > 1 ? std::min(rest, options_.prefill_chunk) : rest, budget));
  if (continuous && n == 0) return false;
  // Blocks this admission takes: the first chunk's (continuous) or the whole prompt's
  // (static), less the hit's blocks, plus what attaching the hit takes from the free count.
  const int positions = continuous ? cached + n : length;
  const int32_t need = hit.blocks() == 0
                           ? kv_.blocks_needed(s.kv_id, positions)
                           : (positions + bs - 1) / bs - hit.blocks() + hit.free_blocks_taken();
  if ((continuous ? 0 : promised) + need > kv_.free_blocks()) return false;
  if (!continuous) promised += need;
  if (prefix_cache_ != nullptr && s.num_computed == 0) {
    // A preempted sequence's tokens hold its own output: no near miss to explain.
    const int got = prefix_cache_->attach(s.kv_id, hit, s.tokens, s.block_hashes, s.id,
                                          /*explain_miss=*/s.preemptions == 0, s.prefix_chain);
    s.num_computed = got;
    s.registered_blocks = got / bs;
    if (s.preemptions == 0) s.cached_prompt_tokens = std::min(got, s.prompt_length);
  }
  // A tier block that failed its checks leaves more to compute than planned.
  const int chunk = chunk_for(s, budget);
  if (chunk > 0 && kv_.can_reserve(s.kv_id, s.num_computed + chunk)) {
    plan_work(s, chunk, false, work, plan, budget);
  }
  return true;
}

std::vector<FinishedRequest> Scheduler::update(const StepPlan& plan, const StepResult& result,
                                               TimePoint now) {
  // Every planned sequence computed what it fed; a padded row "samples" its last token again.
  // Guesses count only once verified (below).
  std::unordered_map<RequestId, int> drafted;
  for (const ScheduledSequence& p : plan.sequences) {
    const auto it = by_id_.find(p.request_id);
    if (it == by_id_.end()) continue;  // ended while the step ran (cannot happen today)
    Sequence& s = *it->second;
    s.num_computed += static_cast<int>(p.tokens.size());
    if (s.padding && p.logits_rows > 0) s.tokens.push_back(s.tokens.back());
    if (!p.draft_tokens.empty()) drafted[p.request_id] = static_cast<int>(p.draft_tokens.size());
  }
  std::vector<FinishedRequest> finished;
  for (const SequenceOutput& out : result.outputs) {
    Sequence* s = live(out.request_id);
    if (s == nullptr) continue;
    for (const SampledToken& t : out.tokens) {
      s->tokens.push_back(t.token);
      if (s->generated() == 1) s->timings.first_token = now;
    }
    if (const auto d = drafted.find(out.request_id); d != drafted.end()) {
      // The emitted tokens are the accepted guesses, then the target's own token; a run cut
      // by a stop ends the request anyway.
      const int accepted = std::clamp(static_cast<int>(out.tokens.size()) - 1, 0, d->second);
      settle_drafts(*s, d->second, accepted);
      drafted.erase(d);
    }
    if (out.finish) {
      finished.push_back(end_request(*s, *out.finish, out.error, now));
      finished.back().error_code = out.error_code;
    }
  }
  for (const auto& [id, proposed] : drafted) {  // a drafted sequence without output
    if (Sequence* s = live(id)) settle_drafts(*s, proposed, 0);
  }
  for (const ScheduledSequence& p : plan.sequences) {
    const Sequence* s = live(p.request_id);
    if (s == nullptr || s->num_computed > p.start_position) continue;
    report_stalled(*s, fmt::format("a step fed it and its position did not advance (still {})",
                                   s->num_computed));
  }
  return finished;
}

FinishedRequest Scheduler::end_request(Sequence& s, FinishReason reason, std::string error,
                                       TimePoint now) {
  s.timings.finished = now;
  FinishedRequest f;
  f.request_id = s.id;
  f.reason = reason;
  f.error = std::move(error);
  f.prompt_tokens = s.prompt_length;
  f.completion_tokens = s.generated();
  f.cached_prompt_tokens = s.cached_prompt_tokens;
  f.preemptions = s.preemptions;
  f.timings = s.timings;
  f.kv_transfer = s.kv_transfer;
  if (reason != FinishReason::kAbort && reason != FinishReason::kError) {
    const NgramLookupCount lookup = count_ngram_lookup_hits(
        s.tokens, s.prompt_length, options_.spec.ngram_min, options_.spec.ngram_max);
    f.lookup_tokens = lookup.tokens;
    f.lookup_hits = lookup.hits;
  }
  // A finished request's prefix stays cached for the next.
  register_blocks(s);
  if (options_.batching == BatchingMode::kStatic && s.status == SequenceStatus::kRunning &&
      reason != FinishReason::kAbort && reason != FinishReason::kError) {
    s.padding = true;  // keeps computing as a dense batch's row until its batch ends
  } else {
    erase(&s);  // blocks freed before the client hears of the end
  }
  return f;
}

std::optional<FinishedRequest> Scheduler::finish(RequestId id, FinishReason reason,
                                                 std::string error, TimePoint now) {
  const auto it = by_id_.find(id);
  if (it == by_id_.end()) return std::nullopt;
  Sequence* s = it->second;
  if (s->padding) {  // its request already ended
    erase(s);
    return std::nullopt;
  }
  return end_request(*s, reason, std::move(error), now);
}

std::vector<FinishedRequest> Scheduler::finish_all(FinishReason reason, TimePoint now) {
  std::vector<RequestId> ids;
  for (const auto& s : running_) ids.push_back(s->id);
  for (const auto& s : waiting_) ids.push_back(s->id);
  std::vector<FinishedRequest> out;
  for (RequestId id : ids) {
    if (auto f = finish(id, reason, {}, now)) out.push_back(std::move(*f));
  }
  return out;
}

void Scheduler::release_kv(const Sequence& s) {
  kv_.release(s.kv_id);
  if (proposer_ != nullptr) proposer_->release(s.kv_id);
}

void Scheduler::erase(Sequence* sequence) {
  release_kv(*sequence);
  spec_.forget(sequence->id);
  by_id_.erase(sequence->id);
  for (auto it = running_.begin(); it != running_.end(); ++it) {
    if (it->get() != sequence) continue;
    running_.erase(it);
    return;
  }
  for (auto it = waiting_.begin(); it != waiting_.end(); ++it) {
    if (it->get() != sequence) continue;
    waiting_.erase(it);
    return;
  }
  fail(ErrorCode::kInternal, "scheduler asked to remove unknown request {}", sequence->id);
}

std::vector<RunningSequence> Scheduler::running_summary() const {
  std::vector<RunningSequence> out;
  out.reserve(running_.size());
  for (const auto& s : running_) {
    if (s->padding) continue;
    out.push_back({s->id, s->prompt_length, s->generated(), s->max_generated});
  }
  return out;
}

const Sequence* Scheduler::get(RequestId id) const {
  const auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : it->second;
}

Sequence* Scheduler::live(RequestId id) {
  const auto it = by_id_.find(id);
  return it == by_id_.end() || it->second->padding ? nullptr : it->second;
}

}  // namespace rapide
