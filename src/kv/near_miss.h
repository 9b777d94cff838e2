// Whether a prompt that left a cached prefix is a near miss of it, told from the tokens after
// the first one that differs: the same text with a small difference (a timestamp, a request
// id, JSON keys in another order), or a prompt that simply goes on differently (a new
// question after a shared system prompt, which reused all it could).
//
// A near miss agrees with the cached chain again after the difference:
//   in step   after a value of either length the two sides realign: prompt[i..] equals
//             cached[j..] for a run of tokens, and mostly goes on equal. i and j are the
//             lengths of the two differing values (a UUID and another UUID, `Alice` and
//             `Bob`), the realignment with the smallest i + j is taken.
//   by content  the difference reorders text (JSON keys, sections): no realignment nearby,
//             but most of the prompt's token 8-grams after the difference occur in the
//             cached chain too.
// A difference at the very end (a question number, then nothing) is no near miss: nothing
// after it could have been reused.
#pragma once

#include <cstdint>
#include <span>

namespace rapide {

struct NearMiss {
  bool near = false;
  bool realigned = false;   // in step: the differing values below are known
  int prompt_differs = -1;  // tokens of the prompt's differing value (-1: not realigned)
  int cached_differs = -1;  // tokens of the cached chain's differing value
};

// `prompt`: the prompt from the first differing token on (as much as the caller has, up to
// its end); `cached`: the cached chain from the same position on.
NearMiss compare_after_divergence(std::span<const int32_t> prompt, std::span<const int32_t> cached);

}  // namespace rapide
