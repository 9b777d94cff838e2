#include "grammar/grammar.h"

#include <functional>

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

// Rules that can match the empty string (fixpoint over the alternatives).
std::vector<bool> nullable_rules(const std::vector<RuleDef>& rules) {
  std::vector<bool> nullable(rules.size(), false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < rules.size(); ++r) {
      if (nullable[r]) continue;
      for (const Alternative& alt : rules[r].alternatives) {
        bool all = true;
        for (const Element& e : alt) {
          if (e.kind != ElementKind::kRule || !nullable[e.rule]) {
            all = false;
            break;
          }
        }
        if (all) {
          nullable[r] = changed = true;
          break;
        }
      }
    }
  }
  return nullable;
}

// The matcher expands a rule reference by pushing each alternative's first element; a rule
// that can reach itself again before consuming a byte would expand forever.
void check_left_recursion(const std::vector<RuleDef>& rules) {
  const std::vector<bool> nullable = nullable_rules(rules);
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
  std::function<void(uint32_t)> visit = [&](uint32_t r) {
    mark[r] = 1;
    for (const uint32_t next : leading[r]) {
      if (mark[next] == 1) {
        fail(ErrorCode::kInvalidArgument, "grammar: rule '{}' is left-recursive", rules[next].name);
      }
      if (mark[next] == 0) visit(next);
    }
    mark[r] = 2;
  };
  for (uint32_t r = 0; r < rules.size(); ++r) {
    if (mark[r] == 0) visit(r);
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
  check_left_recursion(rules);
  g.alternatives_.resize(rules.size());
  for (uint32_t r = 0; r < rules.size(); ++r) {
    g.names_.push_back(rules[r].name);
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
