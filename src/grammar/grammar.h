// A context-free grammar over bytes, as plain data: rules of alternatives of elements, each
// element a byte class or a reference to a rule. Every other form (GBNF text, JSON Schema,
// regex, choices) is translated into this one, and the matcher (matcher.h) runs it.
//
// Layout: all alternatives of all rules live in one element array. An alternative is a run of
// elements ended by kEnd; a rule is a run of alternatives ended by kRuleEnd. A position in the
// grammar is an index into that array, so a parse stack is a list of positions.
//
// Repetitions and options are desugared into helper rules by the builders (x* becomes
// `r ::= x r | ` ), as llama.cpp does. compile() rejects left recursion and references to
// undefined rules, so the matcher's expansion always terminates.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace rapide::grammar {

// A set of bytes (256 bits).
struct ByteSet {
  std::array<uint64_t, 4> bits{};

  bool has(uint8_t b) const { return (bits[b >> 6] >> (b & 63)) & 1; }
  void add(uint8_t b) { bits[b >> 6] |= uint64_t{1} << (b & 63); }
  void add_range(uint8_t lo, uint8_t hi) {
    for (unsigned b = lo; b <= hi; ++b) add(static_cast<uint8_t>(b));
  }
  ByteSet& operator|=(const ByteSet& o) {
    for (size_t i = 0; i < 4; ++i) bits[i] |= o.bits[i];
    return *this;
  }
  bool empty() const { return (bits[0] | bits[1] | bits[2] | bits[3]) == 0; }
  bool operator==(const ByteSet&) const = default;
};

enum class ElementKind : uint8_t { kBytes, kRule, kEnd, kRuleEnd };

struct Element {
  ElementKind kind = ElementKind::kEnd;
  uint32_t rule = 0;  // kRule: the rule referred to
  ByteSet bytes;      // kBytes: the bytes accepted
};

// A rule under construction: alternatives of elements (no kEnd / kRuleEnd markers).
using Alternative = std::vector<Element>;

struct RuleDef {
  std::string name;
  std::vector<Alternative> alternatives;
  // What a builder's helper rule stands for, as written (e.g. "repetition '(x?){100}'"), for
  // errors that name a construct (cost.h); empty for the grammar's own rules.
  std::string origin;
};

Element bytes_element(const ByteSet& set);
Element byte_element(uint8_t b);
Element rule_element(uint32_t rule);

// A compiled grammar: immutable, shared by every request that uses it.
class Grammar {
 public:
  // Lays out `rules` and checks them: every referenced rule exists, no rule is
  // left-recursive (directly or through nullable prefixes), `root` names a rule.
  // Throws Error(kInvalidArgument) naming the rule otherwise.
  static Grammar compile(std::vector<RuleDef> rules, const std::string& root = "root");

  const std::vector<Element>& elements() const { return elements_; }
  // Index of the first element of each alternative of `rule`.
  const std::vector<uint32_t>& alternatives(uint32_t rule) const { return alternatives_[rule]; }
  uint32_t root() const { return root_; }
  size_t num_rules() const { return alternatives_.size(); }
  const std::string& rule_name(uint32_t rule) const { return names_[rule]; }
  const std::string& rule_origin(uint32_t rule) const { return origins_[rule]; }
  // Whether `rule` can match the empty string.
  bool nullable(uint32_t rule) const { return nullable_[rule]; }

 private:
  std::vector<Element> elements_;
  std::vector<std::vector<uint32_t>> alternatives_;  // per rule
  std::vector<std::string> names_;
  std::vector<std::string> origins_;
  std::vector<bool> nullable_;
  uint32_t root_ = 0;
};

}  // namespace rapide::grammar
