// Which tokens of the vocabulary a grammar state allows, and a cache of those sets.
//
// compute_token_mask walks the token trie with the matcher: a trie node whose byte no stack
// takes is skipped with its whole subtree, so a state that expects a literal costs a few
// hundred steps and only free text (inside a JSON string) visits most of the trie. The
// MaskCache keeps masks by canonical state key (Matcher::key): a string's contents, a number's
// digits and the whitespace between values come back to the same few states, so most tokens
// of a long generation cost a lookup and a copy.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "grammar/matcher.h"
#include "grammar/token_trie.h"

namespace rapide::grammar {

struct TokenMask {
  std::vector<uint64_t> words;  // bit t: token t allowed
  size_t allowed = 0;           // number of bits set

  void reset(int vocab_size) {
    words.assign((static_cast<size_t>(vocab_size) + 63) / 64, 0);
    allowed = 0;
  }
  bool allows(int32_t token) const {
    return (words[static_cast<size_t>(token) >> 6] >> (token & 63)) & 1;
  }
  void allow(int32_t token) {
    uint64_t& w = words[static_cast<size_t>(token) >> 6];
    const uint64_t bit = uint64_t{1} << (token & 63);
    allowed += (w & bit) == 0;
    w |= bit;
  }
};

// The tokens whose bytes DFA state `state_id` of `matcher` can take in full (end-of-generation
// tokens when it accepts).
void compute_token_mask(Matcher& matcher, int32_t state_id, const TokenTrie& trie, TokenMask& out);

// Thread-safe map from state key to mask, bounded: once full it stops adding (a grammar with
// that many distinct states gains little from caching).
class MaskCache {
 public:
  explicit MaskCache(size_t capacity = 4096) : capacity_(capacity) {}
  std::shared_ptr<const TokenMask> find(const std::string& key) const;
  void insert(const std::string& key, std::shared_ptr<const TokenMask> mask);

 private:
  size_t capacity_;
  mutable std::mutex mutex_;
  std::unordered_map<std::string, std::shared_ptr<const TokenMask>> masks_;
};

}  // namespace rapide::grammar
