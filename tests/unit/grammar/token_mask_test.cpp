// Token masks from the trie walk agree with the brute-force definition (advance the matcher
// by each token's bytes), cached or not; end-of-generation tokens follow acceptance.
#include <gtest/gtest.h>

#include "grammar/constraint.h"
#include "grammar/gbnf.h"
#include "grammar/json_grammar.h"

namespace rapide::grammar {
namespace {

std::vector<std::string> test_vocab() {
  std::vector<std::string> v = {"",  "</s>-control", "{",    "}",    "\"",    "\":", "{\"",
                                "a", "ab",           "abc",  " ",    "\n",    "1",   "12",
                                "-", "true",         "tr",   "null", "\"a\"", ",",   "\",",
                                "é", "\xC3",         "\xA9", "x",    "[",     "]"};
  v[1] = "";  // a control token: no bytes
  return v;
}

// The DFA state of `walker` after `prefix`.
int32_t walker_state(Matcher& walker, std::string_view prefix) {
  int32_t id = walker.initial_id();
  for (const char c : prefix) id = walker.step(id, static_cast<uint8_t>(c));
  return id;
}

TEST(TokenMask, TrieWalkMatchesBruteForce) {
  const std::vector<std::string> vocab = test_vocab();
  const TokenTrie trie(vocab, {0});
  const Grammar g = parse_gbnf(json_object_gbnf());
  Matcher m(g);
  // Walk a document, comparing masks at each step.
  const std::string doc = R"({"a": [12, true, null, "é"], "ab": {}})";
  MatchState state = m.initial();
  for (size_t i = 0; i <= doc.size(); ++i) {
    TokenMask mask;
    Matcher walker(g);  // a fresh DFA each time: the walk builds it from scratch
    compute_token_mask(walker, walker_state(walker, doc.substr(0, i)), trie, mask);
    size_t expected_allowed = 0;
    for (int32_t t = 0; t < static_cast<int32_t>(vocab.size()); ++t) {
      bool ok = false;
      if (t == 0) {
        ok = state.accepts;
      } else if (!vocab[t].empty()) {
        MatchState s = state;
        ok = m.advance(s, vocab[t]);
      }
      expected_allowed += ok;
      EXPECT_EQ(mask.allows(t), ok)
          << "after '" << doc.substr(0, i) << "' token '" << vocab[t] << "'";
    }
    EXPECT_EQ(mask.allowed, expected_allowed);
    if (i < doc.size()) {
      ASSERT_TRUE(m.advance(state, doc.substr(i, 1)));
    }
  }
  EXPECT_TRUE(state.accepts);
}

TEST(TokenMask, GrammarStateMasksLogitsAndCompletes) {
  const std::vector<std::string> vocab = test_vocab();
  const TokenTrie trie(vocab, {0});
  auto constraint = std::make_shared<const Constraint>(parse_gbnf(choice_gbnf({"ab", "abc"})), "");
  GrammarState a(constraint, trie), b(constraint, trie);
  std::vector<float> logits(vocab.size(), 1.0f);
  EXPECT_EQ(a.apply(logits), 3u);  // "a", "ab", "abc"
  EXPECT_EQ(logits[7], 1.0f);
  EXPECT_EQ(logits[2], -INFINITY);
  EXPECT_EQ(logits[0], -INFINITY);  // EOS before the grammar accepts
  ASSERT_TRUE(a.accept(8));         // "ab"
  EXPECT_FALSE(a.complete());
  EXPECT_TRUE(a.mask().allows(0));  // EOS now allowed, and "c"-less tokens refused
  EXPECT_FALSE(a.mask().allows(8));
  ASSERT_TRUE(a.accept(0));
  EXPECT_TRUE(a.complete());
  ASSERT_TRUE(b.accept(9));  // "abc": nothing can follow
  EXPECT_TRUE(b.complete());
  EXPECT_FALSE(GrammarState(constraint, trie).accept(24));  // "x"
}

}  // namespace
}  // namespace rapide::grammar
