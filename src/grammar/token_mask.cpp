#include "grammar/token_mask.h"

namespace rapide::grammar {

void compute_token_mask(Matcher& matcher, const MatchState& state, const TokenTrie& trie,
                        TokenMask& out) {
  out.reset(trie.vocab_size());
  if (state.accepts) {
    for (const int32_t t : trie.end_of_generation()) out.allow(t);
  }
  // states[d]: the state after the first d bytes of the current trie path.
  std::vector<MatchState> states(trie.max_depth() + 1);
  std::vector<ByteSet> next(trie.max_depth() + 1);
  states[0] = state;
  next[0] = matcher.next_bytes(state);
  const std::vector<int32_t>& tokens = trie.tokens();
  const size_t n = trie.num_nodes();
  for (size_t node = 1; node < n;) {
    const uint32_t d = trie.depth(node);
    const uint8_t b = trie.byte(node);
    if (!next[d - 1].has(b)) {
      node = trie.subtree_end(node);
      continue;
    }
    matcher.advance(states[d - 1], b, states[d]);
    if (states[d].dead()) {
      node = trie.subtree_end(node);
      continue;
    }
    for (uint32_t i = trie.token_begin(node); i < trie.token_begin(node + 1); ++i) {
      out.allow(tokens[i]);
    }
    next[d] = matcher.next_bytes(states[d]);
    ++node;
  }
}

std::shared_ptr<const TokenMask> MaskCache::find(const std::string& key) const {
  std::lock_guard lock(mutex_);
  const auto it = masks_.find(key);
  return it == masks_.end() ? nullptr : it->second;
}

void MaskCache::insert(const std::string& key, std::shared_ptr<const TokenMask> mask) {
  std::lock_guard lock(mutex_);
  if (masks_.size() < capacity_) masks_.emplace(key, std::move(mask));
}

}  // namespace rapide::grammar
