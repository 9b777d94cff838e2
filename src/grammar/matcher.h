// The grammar's pushdown automaton over bytes (llama.cpp's stack-set matcher, with shared
// stacks): a parse state is the set of stacks the grammar may be in after the bytes so far.
//
// Stacks are persistent: a node is (position, parent node), interned so that equal stacks
// are the same node id, and every stack in a state has a byte class on top (rule references
// are expanded eagerly; a reference in tail position pushes nothing, so right recursion such
// as `x* ` keeps stacks bounded). One Matcher belongs to one request: advancing allocates
// nodes and is not thread-safe. key() spells a state independently of node numbering, so
// states of different matchers over the same grammar can share cached masks.
//
// On top, a lazy DFA: stack sets are interned as small state ids and each (id, byte)
// transition is computed once, so walking the token trie costs a table lookup per node once
// the states it passes through are known (inside a JSON string every byte leads back to the
// same state).
//
// Work is counted (work()): one unit per work item expand() takes, per stack advance() tests
// and per trie node a mask walk visits (charge()), and kStateCost per new DFA state (its
// transition table). A limit on it (set_limit) bounds what one token may cost, whatever the
// grammar: past it the call throws Error(kExceedsCapacity) and the matcher stays usable. An
// optional cancellation flag is polled every kCheckEvery units (Error(kCancelled)), so a
// request that went away stops its walk promptly.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "grammar/grammar.h"

namespace rapide::grammar {

struct MatchState {
  std::vector<int32_t> stacks;  // sorted, distinct node ids
  bool accepts = false;         // the bytes so far are a complete sentence

  // Accepted and nothing may follow: generation is over.
  bool complete() const { return accepts && stacks.empty(); }
  bool dead() const { return !accepts && stacks.empty(); }
};

class Matcher {
 public:
  // The grammar must outlive the matcher.
  explicit Matcher(const Grammar& grammar);

  MatchState initial();
  // The state after byte b; dead() when no stack takes it.
  void advance(const MatchState& from, uint8_t b, MatchState& to);
  // Advances byte by byte; false (and `state` dead) when some byte is refused.
  bool advance(MatchState& state, std::string_view bytes);
  // The bytes some stack of `state` takes next.
  ByteSet next_bytes(const MatchState& state) const;
  // A canonical spelling of the state (its stacks' positions, sorted).
  std::string key(const MatchState& state) const;

  // The lazy DFA. Ids are dense from 0; kDead is the state no byte leaves.
  static constexpr int32_t kDead = -1;
  int32_t initial_id();
  int32_t step(int32_t id, uint8_t b);
  const MatchState& state_of(int32_t id) const { return dfa_states_[static_cast<size_t>(id)]; }
  // key() of a DFA state, computed once.
  const std::string& key_of(int32_t id);
  size_t num_dfa_states() const { return dfa_states_.size(); }

  // About what the stacks and the DFA hold, in bytes. They only grow: a grammar that meets
  // new states at every token would hold every one of them until the request ends.
  size_t footprint() const;
  // Forgets every DFA state and stack node but state `id`'s, whose new id it returns (keys,
  // and so the shared mask cache, do not depend on numbering). Outside any walk only.
  int32_t restart_from(int32_t id);

  // Work accounting. The limit counts from the last reset_work(); 0 units reset it.
  static constexpr uint64_t kStateCost = 256;
  static constexpr uint64_t kCheckEvery = 4096;
  void set_limit(uint64_t limit, const std::atomic<bool>* cancelled = nullptr);
  void reset_work();
  uint64_t work() const { return work_; }
  void charge(uint64_t units) {
    work_ += units;
    if (work_ >= check_at_) check_work();
  }

 private:
  // Past the limit or cancelled: throws (leaving no half-done expansion behind).
  void check_work();
  void schedule_check();
  struct Node {
    uint32_t pos;
    int32_t parent;  // -1: bottom of the stack
  };
  int32_t intern(uint32_t pos, int32_t parent);
  // Expands the positions in work_list_ (each on its stack) until every stack has a byte
  // class on top, adding those stacks to `out`; work_list_ is left empty.
  void expand(MatchState& out);
  static void normalize(MatchState& state);

  int32_t intern_state(MatchState&& state);

  const Grammar& grammar_;
  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, int32_t> index_;
  // Whether expand() meets this (position, parent) pair for the first time in this call.
  bool first_visit(uint64_t pair);
  // expand()'s work list; the call's first pairs, then per pair the last call that met it.
  std::vector<Node> work_list_;
  std::array<uint64_t, 32> recent_;
  size_t n_recent_ = 0;
  std::unordered_map<uint64_t, uint64_t> expanded_in_;
  uint64_t expansion_ = 0;
  // DFA states, their transitions (kUnknown until computed) and canonical keys.
  static constexpr int32_t kUnknown = -2;
  std::vector<MatchState> dfa_states_;
  std::vector<std::array<int32_t, 256>> transitions_;
  std::vector<std::string> keys_;
  std::unordered_map<std::string, int32_t> dfa_index_;
  size_t dfa_stacks_ = 0;  // stacks over all DFA states
  MatchState scratch_;
  // Work accounting.
  uint64_t work_ = 0;
  uint64_t limit_ = UINT64_MAX;
  uint64_t check_at_ = UINT64_MAX;
  const std::atomic<bool>* cancelled_ = nullptr;
};

}  // namespace rapide::grammar
