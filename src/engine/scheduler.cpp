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

Scheduler::Scheduler(const EngineOptions& options, PagedKvStore& kv) : options_(options), kv_(kv) {}

void Scheduler::add_waiting(std::unique_ptr<Sequence> sequence) {
  sequence->status = SequenceStatus::kWaiting;
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
    if (victim == nullptr || runs_before(*victim, *s)) victim = s.get();
  }
  return victim;
}

void Scheduler::preempt(Sequence* victim, SchedulerOutput& out, int& budget) {
  kv_.release(victim->kv_id);
  victim->num_computed = 0;
  victim->status = SequenceStatus::kWaiting;
  victim->preemptions++;
  out.preempted++;
  for (auto it = out.work.begin(); it != out.work.end(); ++it) {
    if (it->sequence != victim) continue;
    budget += it->n_tokens;
    (it->is_decode ? out.decode_tokens : out.prefill_tokens) -= it->n_tokens;
    out.work.erase(it);
    break;
  }
}

SchedulerOutput Scheduler::schedule() {
  SchedulerOutput out;
  int budget = options_.max_batch_tokens;
  std::stable_sort(running_.begin(), running_.end(),
                   [](const auto& a, const auto& b) { return runs_before(*a, *b); });

  // Decodes first (one token each, what TPOT depends on), then prefill chunks.
  for (int pass = 0; pass < 2; ++pass) {
    const bool decode_pass = pass == 0;
    for (size_t i = 0; i < running_.size() && budget > 0; ++i) {
      Sequence* s = running_[i].get();
      if (s->status != SequenceStatus::kRunning || s->is_prefilling() == decode_pass) continue;
      const int n = chunk_for(*s, budget);
      if (n == 0) continue;
      bool fits = kv_.can_reserve(s->kv_id, s->num_computed + n);
      while (!fits) {
        Sequence* victim = pick_victim();
        preempt(victim, out, budget);
        if (victim == s) break;
        fits = kv_.can_reserve(s->kv_id, s->num_computed + n);
      }
      if (!fits) continue;
      kv_.reserve(s->kv_id, s->num_computed + n);
      out.work.push_back(
          {s, n, s->num_computed + n == static_cast<int>(s->tokens.size()), decode_pass});
      (decode_pass ? out.decode_tokens : out.prefill_tokens) += n;
      budget -= n;
    }
  }

  // Preempted sequences go back to the queue (ahead of newer arrivals by their order).
  for (auto it = running_.begin(); it != running_.end();) {
    if ((*it)->status == SequenceStatus::kWaiting) {
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
  const bool admitting = continuous ? out.preempted == 0 : running_.empty();
  if (!admitting) return out;
  sort_waiting();
  int32_t promised_blocks = 0;  // static mode: blocks the admitted prompts will need
  while (!waiting_.empty() && static_cast<int>(running_.size()) < options_.max_seqs) {
    Sequence* s = waiting_.front().get();
    const int n = chunk_for(*s, budget);
    if (continuous) {
      if (n == 0 || !kv_.can_reserve(s->kv_id, n)) break;
      kv_.reserve(s->kv_id, n);
      out.work.push_back({s, n, n == static_cast<int>(s->tokens.size()), false});
      out.prefill_tokens += n;
      budget -= n;
    } else {
      const int32_t need = kv_.blocks_needed(s->kv_id, static_cast<int>(s->tokens.size()));
      if (promised_blocks + need > kv_.free_blocks()) break;
      promised_blocks += need;
      if (n > 0 && kv_.can_reserve(s->kv_id, n)) {
        kv_.reserve(s->kv_id, n);
        out.work.push_back({s, n, n == static_cast<int>(s->tokens.size()), false});
        out.prefill_tokens += n;
        budget -= n;
      }
    }
    s->status = SequenceStatus::kRunning;
    running_.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
  }
  return out;
}

std::unique_ptr<Sequence> Scheduler::remove(Sequence* sequence) {
  kv_.release(sequence->kv_id);
  for (auto it = running_.begin(); it != running_.end(); ++it) {
    if (it->get() != sequence) continue;
    std::unique_ptr<Sequence> s = std::move(*it);
    running_.erase(it);
    return s;
  }
  for (auto it = waiting_.begin(); it != waiting_.end(); ++it) {
    if (it->get() != sequence) continue;
    std::unique_ptr<Sequence> s = std::move(*it);
    waiting_.erase(it);
    return s;
  }
  fail(ErrorCode::kInternal, "scheduler asked to remove unknown request {}", sequence->id);
}

std::vector<Sequence*> Scheduler::all() const {
  std::vector<Sequence*> out;
  for (const auto& s : running_) out.push_back(s.get());
  for (const auto& s : waiting_) out.push_back(s.get());
  return out;
}

Sequence* Scheduler::find(RequestId id) {
  for (auto& s : running_) {
    if (s->id == id) return s.get();
  }
  for (auto& s : waiting_) {
    if (s->id == id) return s.get();
  }
  return nullptr;
}

}  // namespace rapide
