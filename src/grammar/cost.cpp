#include "grammar/cost.h"

#include <algorithm>
#include <string>
#include <vector>

#include "base/error.h"

namespace rapide::grammar {

namespace {

constexpr uint64_t kSaturated = uint64_t{1} << 62;

uint64_t add(uint64_t a, uint64_t b) {
  return std::min(kSaturated, a + b);  // both operands are at most 2^62: no overflow
}

// The model's figures for one grammar: X(r) per rule and run(alt, i) per position.
class CostModel {
 public:
  explicit CostModel(const Grammar& g) : g_(g), elements_(g.elements()) {
    expansion_.assign(g.num_rules(), 0);
    expand_rules();
    run_.assign(elements_.size() + 1, 0);
    for (uint32_t r = 0; r < g.num_rules(); ++r) {
      for (const uint32_t alt : g.alternatives(r)) runs_of(alt);
    }
  }

  // X(r): the steps expanding a reference to `rule` takes.
  uint64_t expansion(uint32_t rule) const { return expansion_[rule]; }
  // run(alt, i) at element index `pos`.
  uint64_t run(uint32_t pos) const { return run_[pos]; }

  // The position (element index) whose run is widest, and that run; the root's own expansion
  // (the initial state) counts as a run at no position (kNoPosition).
  static constexpr uint32_t kNoPosition = UINT32_MAX;
  std::pair<uint32_t, uint64_t> widest() const {
    uint32_t at = kNoPosition;
    uint64_t most = expansion_[g_.root()];
    for (uint32_t pos = 0; pos < elements_.size(); ++pos) {
      const ElementKind k = elements_[pos].kind;
      if (k != ElementKind::kRuleEnd && run_[pos] > most) {
        most = run_[pos];
        at = pos;
      }
    }
    return {at, most};
  }

  bool nullable(const Element& e) const {
    return e.kind == ElementKind::kRule && g_.nullable(e.rule);
  }
  uint64_t cost(const Element& e) const {
    return e.kind == ElementKind::kRule ? add(1, expansion_[e.rule]) : 1;
  }

 private:
  // run() of every position of the alternative starting at `alt`, backwards from its end.
  void runs_of(uint32_t alt) {
    uint32_t end = alt;
    while (elements_[end].kind != ElementKind::kEnd) ++end;
    run_[end] = 1;  // the end of the alternative: a return (or acceptance)
    for (uint32_t pos = end; pos-- > alt;) {
      const Element& e = elements_[pos];
      run_[pos] = add(cost(e), nullable(e) ? run_[pos + 1] : 0);
    }
  }

  // The rules an alternative's expansion enters: those of its leading nullable run.
  template <typename F>
  void leading_rules(uint32_t alt, F&& f) const {
    for (uint32_t pos = alt; elements_[pos].kind != ElementKind::kEnd; ++pos) {
      const Element& e = elements_[pos];
      if (e.kind != ElementKind::kRule) break;
      f(e.rule);
      if (!g_.nullable(e.rule)) break;
    }
  }

  // X(r) for every rule, each after the rules its alternatives lead with: a depth-first walk
  // of the leading references, which compile() checked acyclic; iterative, for long chains.
  void expand_rules() {
    std::vector<uint8_t> state(g_.num_rules(), 0);  // 0 new, 1 on the path, 2 done
    std::vector<uint32_t> path;
    for (uint32_t start = 0; start < g_.num_rules(); ++start) {
      if (state[start] != 0) continue;
      path.push_back(start);
      while (!path.empty()) {
        const uint32_t r = path.back();
        if (state[r] == 0) {
          state[r] = 1;
          for (const uint32_t alt : g_.alternatives(r)) {
            leading_rules(alt, [&](uint32_t q) {
              if (state[q] == 0) path.push_back(q);
            });
          }
          continue;
        }
        path.pop_back();
        if (state[r] == 2) continue;  // pushed twice, finished under its first entry
        state[r] = 2;
        uint64_t x = 0;
        for (const uint32_t alt : g_.alternatives(r)) x = add(x, leading_run(alt));
        expansion_[r] = x;
      }
    }
  }

  // run(alt, 0) from the rules' X alone (before run_ is filled).
  uint64_t leading_run(uint32_t alt) const {
    uint64_t total = 0;
    for (uint32_t pos = alt;; ++pos) {
      const Element& e = elements_[pos];
      if (e.kind == ElementKind::kEnd) return add(total, 1);
      total = add(total, cost(e));
      if (!nullable(e)) return total;
    }
  }

  const Grammar& g_;
  const std::vector<Element>& elements_;
  std::vector<uint64_t> expansion_;
  std::vector<uint64_t> run_;
};

// The rule an element index belongs to.
uint32_t rule_of(const Grammar& g, uint32_t pos) {
  // Rules are laid out in order: the last rule whose first alternative starts at or before pos.
  uint32_t lo = 0, hi = static_cast<uint32_t>(g.num_rules());
  while (hi - lo > 1) {
    const uint32_t mid = lo + (hi - lo) / 2;
    if (g.alternatives(mid).front() <= pos)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

std::string rule_label(const Grammar& g, uint32_t rule) {
  const std::string& origin = g.rule_origin(rule);
  return origin.empty() ? fmt::format("rule '{}'", g.rule_name(rule)) : origin;
}

// Follows the widest expansion down to the construct that makes it wide: the innermost rule
// or run whose own expansion is over `limit` while none of its parts' is.
std::string explain(const Grammar& g, const CostModel& model, uint32_t pos, uint64_t limit) {
  const std::vector<Element>& elements = g.elements();
  uint32_t rule = pos == CostModel::kNoPosition ? g.root() : rule_of(g, pos);
  bool at_rule = pos == CostModel::kNoPosition;
  for (;;) {
    if (at_rule) {
      // A rule over the limit: one alternative's run is, or only their sum.
      uint32_t wide = CostModel::kNoPosition;
      for (const uint32_t alt : g.alternatives(rule)) {
        if (model.run(alt) > limit) wide = alt;
      }
      if (wide == CostModel::kNoPosition) {
        return fmt::format(
            "{}: its {} alternatives and the rules they start with expand into {} matcher steps "
            "at once",
            rule_label(g, rule), g.alternatives(rule).size(), model.expansion(rule));
      }
      pos = wide;
      at_rule = false;
      continue;
    }
    // A run over the limit: one part is, or the parts that can match the empty string together.
    size_t parts = 0;
    bool descended = false;
    for (uint32_t p = pos;; ++p) {
      const Element& e = elements[p];
      if (e.kind == ElementKind::kEnd) break;
      if (e.kind == ElementKind::kRule && model.expansion(e.rule) > limit) {
        rule = e.rule;
        at_rule = true;
        descended = true;
        break;
      }
      if (!model.nullable(e)) break;
      ++parts;
    }
    if (descended) continue;
    return fmt::format(
        "{}: {} consecutive parts that can match the empty string expand into {} matcher steps "
        "at once",
        rule_label(g, rule), parts, model.run(pos));
  }
}

}  // namespace

uint64_t widest_expansion(const Grammar& g) {
  return CostModel(g).widest().second;
}

void check_cost(const Grammar& g, uint64_t limit) {
  const CostModel model(g);
  const auto [pos, most] = model.widest();
  if (most <= limit) return;
  fail(ErrorCode::kInvalidArgument,
       "grammar too expensive to follow: {}; the limit is {} (every byte generated would pay "
       "them)",
       explain(g, model, pos, limit), limit);
}

}  // namespace rapide::grammar
