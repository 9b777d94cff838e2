#include "grammar/grammar.h"

#include <cstddef>

#include "base/error.h"

namespace rapide::grammar {

Element bytes_element(const ByteSet& set) {
  Element e;
  e.kind = ElementKind::kBytes;
  e.bytes = set;
  return e;
}

Element byte_element(uint8_t b) {
  ByteSet set;
  set.add(b);
  return bytes_element(set);
}

Element rule_element(uint32_t rule) {
  Element e;
  e.kind = ElementKind::kRule;
  e.rule = rule;
  return e;
}

namespace {

// Rules that can match the empty string. A worklist, not a fixpoint over all rules: each
// alternative made only of rule references counts the references not yet known nullable,
// and a rule found nullable decrements the alternatives that use it. Linear in the grammar's
// size (a request's grammar can chain many thousands of rules in any order).
std::vector<bool> nullable_rules(const std::vector<RuleDef>& rules) {
  std::vector<bool> nullable(rules.size(), false);
  std::vector<uint32_t> owner;  // per counted alternative: its rule
  std::vector<size_t> pending;  // per counted alternative: references not yet nullable
  std::vector<std::vector<uint32_t>> users(rules.size());  // rule -> counted alternatives
  std::vector<uint32_t> found;  // nullable rules whose users are still to be decremented
  auto mark = [&](uint32_t r) {
    if (nullable[r]) return;
    nullable[r] = true;
    found.push_back(r);
  };
  for (uint32_t r = 0; r < rules.size(); ++r) {
    for (const Alternative& alt : rules[r].alternatives) {
      bool only_rules = true;
      for (const Element& e : alt) only_rules = only_rules && e.kind == ElementKind::kRule;
      if (!only_rules) continue;
      if (alt.empty()) {
        mark(r);
        continue;
      }
      const auto a = static_cast<uint32_t>(pending.size());
      owner.push_back(r);
      pending.push_back(alt.size());
      for (const Element& e : alt) users[e.rule].push_back(a);  // once per occurrence
    }
  }
  while (!found.empty()) {
    const uint32_t r = found.back();
    found.pop_back();
    for (const uint32_t a : users[r]) {
      if (--pending[a] == 0) mark(owner[a]);
    }
  }
  return nullable;
}

// The matcher expands a rule reference by pushing each alternative's first element; a rule
// that can reach itself again before consuming a byte would expand forever. An iterative
// depth-first search: leading references can chain as deep as the grammar is long.
void check_left_recursion(const std::vector<RuleDef>& rules, const std::vector<bool>& nullable) {
  std::vector<std::vector<uint32_t>> leading(rules.size());
  for (size_t r = 0; r < rules.size(); ++r) {
    for (const Alternative& alt : rules[r].alternatives) {
      for (const Element& e : alt) {
        if (e.kind != ElementKind::kRule) break;
        leading[r].push_back(e.rule);
        if (!nullable[e.rule]) break;
      }
    }
  }
  std::vector<uint8_t> mark(rules.size(), 0);  // 0 new, 1 on the DFS path, 2 done
  struct Frame {
    uint32_t rule;
    size_t next;  // index into leading[rule] of the next reference to follow
  };
  std::vector<Frame> path;
  for (uint32_t root = 0; root < rules.size(); ++root) {
    if (mark[root] != 0) continue;
    mark[root] = 1;
    path.push_back({root, 0});
    while (!path.empty()) {
      Frame& f = path.back();
      if (f.next == leading[f.rule].size()) {
        mark[f.rule] = 2;
        path.pop_back();
        continue;
      }
      const uint32_t next = leading[f.rule][f.next++];
      if (mark[next] == 1) {
        fail(ErrorCode::kInvalidArgument, "grammar: rule '{}' is left-recursive", rules[next].name);
      }
      if (mark[next] == 0) {
        mark[next] = 1;
        path.push_back({next, 0});  // invalidates f
      }
    }
  }
}

}  // namespace

Grammar Grammar::compile(std::vector<RuleDef> rules, const std::string& root) {
  Grammar g;
  bool found_root = false;
  for (uint32_t r = 0; r < rules.size(); ++r) {
    if (rules[r].alternatives.empty()) {
      fail(ErrorCode::kInvalidArgument, "grammar: rule '{}' is used but not defined",
           rules[r].name);
    }
    for (const Alternative& alt : rules[r].alternatives) {
      for (const Element& e : alt) {
        if (e.kind == ElementKind::kRule && e.rule >= rules.size()) {
          fail(ErrorCode::kInvalidArgument, "grammar: rule '{}' refers to an unknown rule",
               rules[r].name);
        }
      }
    }
    if (rules[r].name == root) {
      g.root_ = r;
      found_root = true;
    }
  }
  if (!found_root) fail(ErrorCode::kInvalidArgument, "grammar: no '{}' rule", root);
  g.nullable_ = nullable_rules(rules);
  check_left_recursion(rules, g.nullable_);
  g.alternatives_.resize(rules.size());
  for (uint32_t r = 0; r < rules.size(); ++r) {
    g.names_.push_back(rules[r].name);
    g.origins_.push_back(rules[r].origin);
    for (const Alternative& alt : rules[r].alternatives) {
      g.alternatives_[r].push_back(static_cast<uint32_t>(g.elements_.size()));
      g.elements_.insert(g.elements_.end(), alt.begin(), alt.end());
      g.elements_.push_back(Element{});  // kEnd
    }
    Element rule_end;
    rule_end.kind = ElementKind::kRuleEnd;
    g.elements_.push_back(rule_end);
  }
  return g;
}

}  // namespace rapide::grammar
