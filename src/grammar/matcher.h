// The grammar's pushdown automaton over bytes (llama.cpp's stack-set matcher, with shared
// stacks): a parse state is the set of stacks the grammar may be in after the bytes so far.
//
// Stacks are persistent: a node is (position, parent node), interned so that equal stacks
// are the same node id, and every stack in a state has a byte class on top (rule references
// are expanded eagerly; a reference in tail position pushes nothing, so right recursion such
// as `x* ` keeps stacks bounded). One Matcher belongs to one request: advancing allocates
// nodes and is not thread-safe. key() spells a state independently of node numbering, so
// states of different matchers over the same grammar can share cached masks.
#pragma once

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

 private:
  struct Node {
    uint32_t pos;
    int32_t parent;  // -1: bottom of the stack
  };
  int32_t intern(uint32_t pos, int32_t parent);
  void expand(uint32_t pos, int32_t parent, MatchState& out);
  static void normalize(MatchState& state);

  const Grammar& grammar_;
  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, int32_t> index_;
};

}  // namespace rapide::grammar
