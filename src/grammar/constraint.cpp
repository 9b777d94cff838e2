#include "grammar/constraint.h"

#include <algorithm>
#include <limits>

namespace rapide::grammar {

uint64_t default_work_per_token(const TokenTrie& trie) {
  return kWorkPerTokenBase + kWorkPerTrieNode * trie.num_nodes();
}

GrammarState::GrammarState(std::shared_ptr<const Constraint> constraint, const TokenTrie& trie,
                           GrammarLimits limits, std::shared_ptr<const std::atomic<bool>> cancelled)
    : constraint_(std::move(constraint)),
      trie_(trie),
      limits_(limits),
      cancelled_(std::move(cancelled)),
      matcher_(constraint_->grammar) {
  matcher_.set_limit(limits_.work_per_token, cancelled_.get());
  state_ = matcher_.initial_id();
  matcher_.reset_work();
}

const TokenMask& GrammarState::mask() {
  if (mask_) return *mask_;
  if (!alive() || ended_) {  // nothing may follow
    auto none = std::make_shared<TokenMask>();
    none->reset(trie_.vocab_size());
    mask_ = std::move(none);
    return *mask_;
  }
  try {
    // Between two walks: the only point where the matcher may drop what it learnt.
    if (matcher_.footprint() > limits_.matcher_bytes) state_ = matcher_.restart_from(state_);
    // A copy: the walk below may grow the matcher's key table.
    const std::string key = matcher_.key_of(state_);
    mask_ = constraint_->masks.find(key);
    if (!mask_) {
      auto mask = std::make_shared<TokenMask>();
      compute_token_mask(matcher_, state_, trie_, *mask);
      constraint_->masks.insert(key, mask);
      mask_ = std::move(mask);
    }
  } catch (...) {
    state_ = Matcher::kDead;  // over the limit or cancelled: the request is over
    mask_.reset();
    throw;
  }
  return *mask_;
}

size_t GrammarState::apply(std::span<float> logits) {
  const TokenMask& m = mask();
  constexpr float kBanned = -std::numeric_limits<float>::infinity();
  const size_t n = std::min(logits.size(), m.words.size() * 64);
  for (size_t w = 0; w * 64 < n; ++w) {
    const uint64_t allowed = m.words[w];
    if (allowed == ~uint64_t{0}) continue;
    const size_t end = std::min(n, w * 64 + 64);
    for (size_t t = w * 64; t < end; ++t) {
      if (!((allowed >> (t - w * 64)) & 1)) logits[t] = kBanned;
    }
  }
  for (size_t t = n; t < logits.size(); ++t) logits[t] = kBanned;
  return m.allowed;
}

bool GrammarState::accept(int32_t token) {
  mask_.reset();
  const auto& eog = trie_.end_of_generation();
  if (!alive() || ended_) return false;
  if (std::find(eog.begin(), eog.end(), token) != eog.end()) {
    if (!accepts()) {
      state_ = Matcher::kDead;
      return false;
    }
    ended_ = true;
    return true;
  }
  const bool known = token >= 0 && token < trie_.vocab_size();
  if (!known || trie_.piece(token).empty()) {
    state_ = Matcher::kDead;
    return false;
  }
  try {
    for (const char c : trie_.piece(token)) {
      state_ = matcher_.step(state_, static_cast<uint8_t>(c));
      if (!alive()) return false;
    }
  } catch (...) {
    state_ = Matcher::kDead;  // cut short mid-token: no state to continue from
    throw;
  }
  matcher_.reset_work();  // the next token's budget
  return true;
}

}  // namespace rapide::grammar
