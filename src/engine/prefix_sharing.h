// How much of the traffic's prompts an ideal prefix cache could serve, measured whether the
// prefix cache is on or off: question 2 of the advisor ("do requests share a recurring
// prefix?") needs it exactly when the cache is off, and compares it with the cache's hit
// rate when it is on.
//
// Each prompt's full blocks are hashed the way the prefix cache names them (kv/block_hash.h)
// and looked up in a bounded set of the hashes seen before: a block whose chained hash was
// seen is a token run some earlier prompt had at the same place with the same prefix. The
// set forgets everything when it fills (a bounded memory, not an LRU: it only has to notice
// recurring prefixes, which come back soon). Hashing is a few nanoseconds per token, far
// below the prompt's forward pass.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>

namespace rapide {

struct PrefixSharingStats {
  uint64_t prompts = 0;
  uint64_t prompt_tokens = 0;
  uint64_t shareable_tokens = 0;  // in leading full blocks some earlier prompt had
  uint64_t sharing_prompts = 0;   // prompts with at least one such block
  // Distinct blocks that recurred (were served at least once): the prefixes a cache must
  // keep to serve the shareable tokens, on top of what running requests hold.
  uint64_t recurring_blocks = 0;
  double shareable_fraction() const {
    return prompt_tokens ? static_cast<double>(shareable_tokens) / prompt_tokens : 0.0;
  }
};

class PrefixSharingProbe {
 public:
  PrefixSharingProbe(int block_size, uint64_t extra_key, size_t max_hashes = 1 << 16);
  void observe(std::span<const int32_t> prompt);
  const PrefixSharingStats& stats() const { return stats_; }

 private:
  int block_size_;
  uint64_t extra_key_;
  size_t max_hashes_;
  std::unordered_map<uint64_t, bool> seen_;  // hash -> recurred already
  PrefixSharingStats stats_;
};

}  // namespace rapide
