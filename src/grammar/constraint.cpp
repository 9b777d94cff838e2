#include "grammar/constraint.h"

#include <algorithm>
#include <limits>

namespace rapide::grammar {

GrammarState::GrammarState(std::shared_ptr<const Constraint> constraint, const TokenTrie& trie)
    : constraint_(std::move(constraint)), trie_(trie), matcher_(constraint_->grammar) {
  state_ = matcher_.initial();
}

const TokenMask& GrammarState::mask() {
  if (mask_) return *mask_;
  const std::string key = matcher_.key(state_);
  mask_ = constraint_->masks.find(key);
  if (!mask_) {
    auto mask = std::make_shared<TokenMask>();
    compute_token_mask(matcher_, state_, trie_, *mask);
    constraint_->masks.insert(key, mask);
    mask_ = std::move(mask);
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
  if (std::find(eog.begin(), eog.end(), token) != eog.end()) {
    if (!state_.accepts) return false;
    state_.stacks.clear();  // complete
    return true;
  }
  if (token < 0 || token >= trie_.vocab_size()) return false;
  const std::string& piece = trie_.piece(token);
  if (piece.empty()) {
    state_ = MatchState{};
    return false;
  }
  return matcher_.advance(state_, piece);
}

}  // namespace rapide::grammar
