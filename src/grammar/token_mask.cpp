#include "grammar/token_mask.h"

namespace rapide::grammar {

void compute_token_mask(Matcher& matcher, int32_t state_id, const TokenTrie& trie, TokenMask& out) {
  out.reset(trie.vocab_size());
  if (matcher.state_of(state_id).accepts) {
    for (const int32_t t : trie.end_of_generation()) out.allow(t);
  }
  // ids[d]: the DFA state after the first d bytes of the current trie path.
  std::vector<int32_t> ids(trie.max_depth() + 1);
  ids[0] = state_id;
  const std::vector<int32_t>& tokens = trie.tokens();
  const size_t n = trie.num_nodes();
  for (size_t node = 1; node < n;) {
    matcher.charge(1);
    const uint32_t d = trie.depth(node);
    const int32_t next = matcher.step(ids[d - 1], trie.byte(node));
    if (next == Matcher::kDead) {
      node = trie.subtree_end(node);
      continue;
    }
    ids[d] = next;
    for (uint32_t i = trie.token_begin(node); i < trie.token_begin(node + 1); ++i) {
      out.allow(tokens[i]);
    }
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
