// A request's output constraint, as the sampling path sees it.
//
// Constraint is what a request carries (SamplingParams::constraint): the compiled grammar
// plus a mask cache shared by every request with the same grammar. GrammarState is one
// sequence's position in it: it masks a logits row before sampling and advances by the token
// sampled. One vocabulary per process (a server serves one model), so the cache is keyed by
// grammar state only.
#pragma once

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

class GrammarState {
 public:
  // `constraint` and `trie` must outlive the state.
  GrammarState(std::shared_ptr<const Constraint> constraint, const TokenTrie& trie);

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

 private:
  std::shared_ptr<const Constraint> constraint_;
  const TokenTrie& trie_;
  bool alive() const { return state_ != Matcher::kDead; }

  Matcher matcher_;
  int32_t state_ = Matcher::kDead;         // a DFA state of matcher_
  bool ended_ = false;                     // an end-of-generation token was accepted
  std::shared_ptr<const TokenMask> mask_;  // of state_, null until asked
};

}  // namespace rapide::grammar
