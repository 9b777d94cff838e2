// A prefix-cache miss explained for people: the failure "identical prompts, yet the hit
// rate stays low" is nearly always a small difference early in the prompt (a timestamp,
// a request id, a reordered field). A record says where the prompt left the best cached
// prefix and shows the text on both sides, e.g.
//   same 1,980 characters, then `...T10:04:11` vs `...T10:04:12`
#pragma once

#include <cstdint>
#include <string>

#include "kv/prefix_cache.h"
#include "tokenizer/tokenizer.h"

namespace rapide {

struct PrefixMissRecord {
  uint64_t request_id = 0;
  int prompt_tokens = 0;
  int reused_tokens = 0;       // served from the cache (whole blocks)
  int matched_tokens = 0;      // equal to the best cached prefix
  int divergent_position = 0;  // first token that differs (== matched_tokens)
  int same_characters = 0;     // characters of text before the divergence
  std::string before;          // the last characters before the divergence
  std::string prompt_text;     // this prompt from the divergence on
  std::string cached_text;     // the cached prefix from the divergence on
  // The two differing values, when the texts fall back in step after them (a UUID and
  // another UUID, `Alice` and `Bob`; kv/near_miss.h); `realigned` false: the texts agree
  // by content after the difference (reordered), and only the windows above are known.
  bool realigned = false;
  std::string prompt_value, cached_value;
  std::string summary;  // one line combining the above
};

PrefixMissRecord describe_miss(const PrefixDivergence& d, const Tokenizer& tokenizer);

}  // namespace rapide
