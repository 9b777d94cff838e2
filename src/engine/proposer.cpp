#include "engine/proposer.h"

#include <algorithm>
#include <cmath>

#include "base/clock.h"
#include "base/error.h"
#include "engine/model_identity.h"
#include "engine/speculation.h"

namespace rapide {

void NgramProposer::propose(std::span<ProposalRequest> requests) {
  for (ProposalRequest& r : requests) r.guesses = propose_ngram(r.tokens, r.k, min_n_, max_n_);
}

DraftModelProposer::DraftModelProposer(Model& draft, ThreadPool& pool, int32_t blocks,
                                       int block_size, int max_context, KvType kv_type,
                                       double min_confidence, bool prefix_cache)
    : model_(draft), pool_(pool), min_confidence_(min_confidence) {
  const KvLayout layout = KvLayout::for_model(draft.config(), block_size, kv_type);
  kv_ = std::make_unique<PagedKvStore>(layout, blocks, max_context);
  if (prefix_cache) {
    cache_ = std::make_unique<PrefixCache>(*kv_, model_identity(draft, layout), nullptr);
  }
}

DraftModelProposer::~DraftModelProposer() = default;

namespace {

int32_t argmax(const float* row, int n) {
  int32_t best = 0;
  for (int i = 1; i < n; ++i) {
    if (row[i] > row[best]) best = i;
  }
  return best;
}

// The probability softmax(row) gives its best token.
double top_probability(const float* row, int n, int32_t best) {
  double sum = 0.0;
  for (int i = 0; i < n; ++i) sum += std::exp(static_cast<double>(row[i] - row[best]));
  return 1.0 / sum;
}

}  // namespace

void DraftModelProposer::propose(std::span<ProposalRequest> requests) {
  const TimePoint start = Clock::now();
  const int vocab = model_.config().vocab_size;
  // Round 0 feeds what each sequence's draft KV lacks of its verified tokens and reads the
  // first guess from the last row; round j > 0 feeds guess j and reads guess j + 1. The last
  // guess is never fed, so a sequence ends a step holding length + k - 1 draft positions.
  std::vector<size_t> active;
  batch_.clear();
  passes_.clear();
  for (size_t i = 0; i < requests.size(); ++i) {
    ProposalRequest& r = requests[i];
    r.guesses.clear();
    r.distributions.clear();
    if (r.k <= 0) continue;
    const int length = static_cast<int>(r.tokens.size());
    if (cache_ && !kv_->has_sequence(r.kv_id)) attach_cached(r);
    const int have = std::min(kv_->positions(r.kv_id), length - 1);
    if (kv_->positions(r.kv_id) > have) kv_->truncate(r.kv_id, have);
    if (length - have > kMaxCatchUp) {
      // A long prompt: one piece per step, guesses once the draft has seen all of it.
      if (!kv_->try_reserve(r.kv_id, have + kMaxCatchUp)) continue;
      for (int p = have; p < have + kMaxCatchUp; ++p) batch_.add(r.tokens[p], r.kv_id, p, false);
      continue;
    }
    if (!kv_->try_reserve(r.kv_id, length + r.k - 1)) continue;  // the draft's KV is full
    for (int p = have; p < length; ++p) batch_.add(r.tokens[p], r.kv_id, p, p + 1 == length);
    active.push_back(i);
  }
  while (!batch_.empty()) {
    const TimePoint pass_start = Clock::now();
    const std::span<const float> logits = model_.forward(batch_, *kv_, pool_);
    passes_.emplace_back(static_cast<int>(batch_.size()),
                         seconds_between(pass_start, Clock::now()));
    size_t row = 0;
    std::vector<size_t> confident;
    for (size_t i : active) {
      const float* l = logits.data() + row * vocab;
      ++row;
      if (requests[i].sampler != nullptr) {
        if (sample_guess(requests[i], l, vocab)) confident.push_back(i);
        continue;
      }
      const int32_t best = argmax(l, vocab);
      // An unsure draft stops guessing (llama.cpp's --draft-p-min): its guess would mostly be
      // rejected, and every guess costs a draft pass and a verification row.
      if (top_probability(l, vocab, best) < min_confidence_) continue;
      requests[i].guesses.push_back(best);
      confident.push_back(i);
    }
    batch_.clear();
    std::vector<size_t> next;
    for (size_t i : confident) {
      ProposalRequest& r = requests[i];
      const int guessed = static_cast<int>(r.guesses.size());
      if (guessed >= r.k) continue;
      const int position = static_cast<int>(r.tokens.size()) - 1 + guessed;
      batch_.add(r.guesses.back(), r.kv_id, position, true);
      next.push_back(i);
    }
    active.swap(next);
  }
  if (cache_) {
    // The verified tokens' full blocks are shareable now (guesses sit past them).
    for (ProposalRequest& r : requests) {
      if (!kv_->has_sequence(r.kv_id)) continue;
      CacheState& state = cache_state_[r.kv_id];
      const int verified = std::min(kv_->positions(r.kv_id), static_cast<int>(r.tokens.size()));
      cache_->extend_hashes(r.tokens, state.hashes);
      cache_->cache_blocks(r.kv_id, state.hashes, verified, r.tokens, &state.registered);
    }
  }
  draft_seconds_ += seconds_between(start, Clock::now());
}

bool DraftModelProposer::sample_guess(ProposalRequest& r, const float* logits, int vocab) {
  scratch_.assign(logits, logits + vocab);
  history_.assign(r.tokens.begin(), r.tokens.end());
  history_.insert(history_.end(), r.guesses.begin(), r.guesses.end());
  r.sampler->set_num_sampled(r.generated + static_cast<int>(r.guesses.size()));
  try {
    r.guesses.push_back(r.sampler->sample(scratch_, history_).token);
  } catch (const std::exception&) {
    return false;  // nothing left to sample: the target's own sampler will say why
  }
  const std::span<const Candidate> q = r.sampler->last_distribution();
  r.distributions.emplace_back(q.begin(), q.end());
  return true;
}

void DraftModelProposer::attach_cached(const ProposalRequest& r) {
  CacheState& state = cache_state_[r.kv_id];
  cache_->extend_hashes(r.tokens, state.hashes);
  const PrefixMatch hit = cache_->match(r.tokens, state.hashes);
  if (hit.blocks() == 0 || hit.free_blocks_taken() > kv_->free_blocks()) return;
  const int got = cache_->attach(r.kv_id, hit, r.tokens, state.hashes, r.request_id);
  state.registered = got / kv_->block_size();
  cached_tokens_ += static_cast<uint64_t>(got);
}

void DraftModelProposer::rollback(int32_t kv_id, int positions) {
  if (kv_->has_sequence(kv_id) && kv_->positions(kv_id) > positions) {
    kv_->truncate(kv_id, positions);
  }
}

void DraftModelProposer::release(int32_t kv_id) {
  kv_->release(kv_id);
}

void check_same_vocabulary(const Tokenizer& target, const Tokenizer& draft) {
  if (target.vocab_size() != draft.vocab_size()) {
    fail(ErrorCode::kInvalidArgument,
         "--draft-model: its vocabulary has {} tokens, the target's {}; speculation needs the "
         "same vocabulary",
         draft.vocab_size(), target.vocab_size());
  }
  const std::vector<std::string>& a = target.data().tokens;
  const std::vector<std::string>& b = draft.data().tokens;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i]) {
      fail(ErrorCode::kInvalidArgument,
           "--draft-model: token {} is '{}' in the draft but '{}' in the target; speculation "
           "needs the same vocabulary",
           i, b[i], a[i]);
    }
  }
}

}  // namespace rapide
