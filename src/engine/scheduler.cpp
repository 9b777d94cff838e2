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

Scheduler::Scheduler(const EngineOptions& options, PagedKvStore& kv, PrefixCache* prefix_cache)
    : options_(options), kv_(kv), prefix_cache_(prefix_cache) {}

void Scheduler::register_blocks(Sequence& s) {
  if (prefix_cache_ == nullptr) return;
  prefix_cache_->extend_hashes(s.tokens, s.block_hashes);
  prefix_cache_->cache_blocks(s.kv_id, s.block_hashes, s.num_computed, s.tokens,
                              &s.registered_blocks);
}

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
    if (s->padding) return s.get();  // padding gives way before any live request
    if (victim == nullptr || runs_before(*victim, *s)) victim = s.get();
  }
  return victim;
}

void Scheduler::retire_to_padding(Sequence* sequence) {
  register_blocks(*sequence);  // the request's own tokens stay cached, as on removal
  sequence->padding = true;
  sequence->sink.reset();
}

void Scheduler::drop_padding(Sequence* sequence) {
  kv_.release(sequence->kv_id);
  sequence->status = SequenceStatus::kFinished;
}

void Scheduler::end_batch_if_only_padding() {
  if (running_.empty()) return;
  for (const auto& s : running_) {
    if (!s->padding) return;
  }
  for (const auto& s : running_) kv_.release(s->kv_id);
  running_.clear();
}

void Scheduler::preempt(Sequence* victim, SchedulerOutput& out, int& budget) {
  if (victim->padding) {
    drop_padding(victim);
    for (auto it = out.work.begin(); it != out.work.end(); ++it) {
      if (it->sequence != victim) continue;
      budget += it->n_tokens;
      out.decode_tokens -= it->n_tokens;
      out.work.erase(it);
      break;
    }
    return;
  }
  register_blocks(*victim);  // its full blocks stay cached: re-admission reuses them
  kv_.release(victim->kv_id);
  victim->num_computed = 0;
  victim->registered_blocks = 0;
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
  end_batch_if_only_padding();
  std::stable_sort(running_.begin(), running_.end(),
                   [](const auto& a, const auto& b) { return runs_before(*a, *b); });
  for (auto& s : running_) {
    if (!s->padding) register_blocks(*s);  // a padded row's tokens are no prefix anyone sends
  }

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

  // Preempted sequences go back to the queue (ahead of newer arrivals by their order);
  // dropped padding just goes.
  for (auto it = running_.begin(); it != running_.end();) {
    if ((*it)->status == SequenceStatus::kFinished) {
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
  const bool admitting = continuous ? out.preempted == 0 : running_.empty();
  if (!admitting) return out;
  sort_waiting();
  int32_t promised_blocks = 0;  // static mode: blocks the admitted prompts will need
  while (!waiting_.empty() && static_cast<int>(running_.size()) < options_.max_seqs) {
    Sequence* s = waiting_.front().get();
    if (!admit(*s, budget, promised_blocks, out)) break;
    s->status = SequenceStatus::kRunning;
    running_.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
  }
  return out;
}

bool Scheduler::admit(Sequence& s, int& budget, int32_t& promised, SchedulerOutput& out) {
  const bool continuous = options_.batching == BatchingMode::kContinuous;
  const int length = static_cast<int>(s.tokens.size());
  const int bs = kv_.block_size();
  PrefixMatch hit;
  if (prefix_cache_ != nullptr && s.num_computed == 0) {
    prefix_cache_->extend_hashes(s.tokens, s.block_hashes);
    hit = prefix_cache_->match(s.tokens, s.block_hashes);
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
    const int got = prefix_cache_->attach(s.kv_id, hit, s.tokens, s.block_hashes, s.id);
    s.num_computed = got;
    s.registered_blocks = got / bs;
    if (s.preemptions == 0) s.cached_prompt_tokens = std::min(got, s.prompt_length);
  }
  // A tier block that failed its checks leaves more to compute than planned.
  const int chunk = chunk_for(s, budget);
  if (chunk > 0 && kv_.can_reserve(s.kv_id, s.num_computed + chunk)) {
    kv_.reserve(s.kv_id, s.num_computed + chunk);
    out.work.push_back({&s, chunk, s.num_computed + chunk == length, false});
    out.prefill_tokens += chunk;
    budget -= chunk;
  }
  return true;
}

std::unique_ptr<Sequence> Scheduler::remove(Sequence* sequence) {
  // A finished request's prefix stays cached for the next (padding registered it on retiring).
  if (!sequence->padding) register_blocks(*sequence);
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
    if (s->id == id && !s->padding) return s.get();
  }
  for (auto& s : waiting_) {
    if (s->id == id) return s.get();
  }
  return nullptr;
}

}  // namespace rapide
