// The static cost model of a grammar, checked when a request's grammar is admitted (on the
// request's worker, before the engine sees it).
//
// What the matcher (matcher.h) pays per byte is the expansion: from a position it follows
// every alternative of every rule it meets, through each part that can match the empty
// string, until a byte class tops each stack. The cost of expanding from a position is the
// number of those steps:
//   run(alt, i) = c(e_i) + (e_i nullable ? run(alt, i + 1) : 0),  run(alt, end) = 1
//   c(byte class) = 1,  c(rule r) = 1 + X(r),  X(r) = sum over r's alternatives of run(alt, 0)
// (saturating). It is finite: the leading references of a compiled grammar form no cycle.
// The widest expansion, the largest run from any position, is what one byte can cost a state
// the matcher meets; (.*){2000}, (x?){10000} or an anyOf tree of 2^16 leaves make it tens of
// thousands wide, and every byte of every vocabulary token in the mask walk pays it again.
//
// Past the limit, check_cost throws Error(kInvalidArgument) naming the construct: the rule
// (or the repetition or group of it, with its source text, for the parser's helper rules)
// whose own expansion is over the limit while none of its parts' is, and why: "N consecutive
// parts that can match the empty string" or "its N alternatives". What an expansion cannot
// show, states that accumulate over many bytes ((.+){2000} after 2000 bytes), the per-token
// work limit catches while matching (constraint.h).
#pragma once

#include <cstdint>

#include "grammar/grammar.h"

namespace rapide::grammar {

// Work items one expansion may take (about 60-150 ns each): 4096 is ~0.5 ms per new DFA state
// and byte, while a JSON value expands into ~20 and a 1000-value enum into ~1000.
inline constexpr uint64_t kMaxExpansion = 4096;

// The widest expansion of `g` (saturating at 2^62).
uint64_t widest_expansion(const Grammar& g);

// Throws Error(kInvalidArgument) when the widest expansion of `g` exceeds `limit`.
void check_cost(const Grammar& g, uint64_t limit = kMaxExpansion);

}  // namespace rapide::grammar
