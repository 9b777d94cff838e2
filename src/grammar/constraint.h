// A request's output constraint, as the sampling path sees it.
//
// Constraint is what a request carries (SamplingParams::constraint): the compiled grammar
// plus a mask cache shared by every request with the same grammar. GrammarState is one
// sequence's position in it: it masks a logits row before sampling and advances by the token
// sampled. One vocabulary per process (a server serves one model), so the cache is keyed by
// grammar state only.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "grammar/grammar.h"
#include "grammar/matcher.h"
#include "grammar/token_mask.h"
#include "grammar/token_trie.h"

namespace rapide::grammar {

struct Constraint {
  Grammar grammar;
  std::string source;  // the GBNF text, for logs and errors
  mutable MaskCache masks;

  Constraint(Grammar g, std::string text) : grammar(std::move(g)), source(std::move(text)) {}
};

// What following a grammar may cost one token: matcher steps (Matcher::work) between two
// accepted tokens, the mask's trie walk included. A walk visits each trie node at most once,
// so the limit is a fixed allowance plus kWorkPerTrieNode per node: with the 32000-token
// Llama-2 vocabulary (57507 nodes) 1.23 M steps, 70-180 ms here, where realistic schemas'
// costliest token (a cold mask inside a string, or a 500-value enum's shared prefix) takes
// 70-200 k (bench_grammar_mask). Past it the request fails instead of holding up the engine.
inline constexpr uint64_t kWorkPerTokenBase = 1'000'000;
inline constexpr uint64_t kWorkPerTrieNode = 4;
uint64_t default_work_per_token(const TokenTrie& trie);

// What one sequence's matcher may hold before it forgets every DFA state but its current one
// (Matcher::restart_from; checked before each mask). Realistic generations stay far below
// (a few hundred states, 1 KiB each); a grammar that meets new states at every token would
// otherwise grow by up to the per-token limit's worth each token.
inline constexpr size_t kMaxMatcherBytes = size_t{64} << 20;

struct GrammarLimits {
  uint64_t work_per_token = UINT64_MAX;     // UINT64_MAX: no limit
  size_t matcher_bytes = kMaxMatcherBytes;  // footprint that triggers a restart
};

class GrammarState {
 public:
  // `constraint` and `trie` must outlive the state. The constructor, mask(), apply() and
  // accept() throw Error(kExceedsCapacity) when a token costs more than
  // limits.work_per_token matcher steps (the engine uses default_work_per_token), and
  // Error(kCancelled) soon after `*cancelled` becomes true (polled during the work). After
  // such an error the state is dead: the request is over.
  GrammarState(std::shared_ptr<const Constraint> constraint, const TokenTrie& trie,
               GrammarLimits limits = {},
               std::shared_ptr<const std::atomic<bool>> cancelled = nullptr);

  // The tokens allowed next (cached by state).
  const TokenMask& mask();
  // Sets the logits of forbidden tokens to -infinity; returns how many stay allowed.
  size_t apply(std::span<float> logits);
  // Advances by a sampled token. End-of-generation tokens complete the grammar when it
  // accepts. False when the token is not allowed (the state is then dead).
  bool accept(int32_t token);
  // The output is a complete sentence and nothing more may follow.
  bool complete() const { return ended_ || (alive() && matcher_.state_of(state_).complete()); }
  bool accepts() const { return ended_ || (alive() && matcher_.state_of(state_).accepts); }
  // Matcher steps spent on the current token so far, and what the matcher holds.
  uint64_t work() const { return matcher_.work(); }
  size_t footprint() const { return matcher_.footprint(); }

 private:
  std::shared_ptr<const Constraint> constraint_;
  const TokenTrie& trie_;
  GrammarLimits limits_;
  std::shared_ptr<const std::atomic<bool>> cancelled_;
  bool alive() const { return state_ != Matcher::kDead; }

  Matcher matcher_;
  int32_t state_ = Matcher::kDead;         // a DFA state of matcher_
  bool ended_ = false;                     // an end-of-generation token was accepted
  std::shared_ptr<const TokenMask> mask_;  // of state_, null until asked
};

}  // namespace rapide::grammar
