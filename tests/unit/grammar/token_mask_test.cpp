// Token masks from the trie walk agree with the brute-force definition (advance the matcher
// by each token's bytes), cached or not; end-of-generation tokens follow acceptance.
#include <gtest/gtest.h>

#include "base/error.h"
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

// A grammar inside the admission limits whose masks still cost much per token: 250 copies of
// a nullable `.*` keep ~3500 stacks alive at every byte.
std::shared_ptr<const Constraint> expensive_constraint() {
  return std::make_shared<const Constraint>(parse_gbnf(regex_gbnf("(.*){250}")), "");
}

TEST(TokenMask, PerTokenWorkLimitFailsTheExpensiveStateOnly) {
  const std::vector<std::string> vocab = test_vocab();
  const TokenTrie trie(vocab, {0});
  // Unlimited, the first mask's work is what the limit below must cut short. (Each state gets
  // a constraint of its own: a mask cached by the first would cost the second nothing.)
  GrammarState unlimited(expensive_constraint(), trie);
  unlimited.mask();
  const uint64_t first_mask = unlimited.work();
  ASSERT_GT(first_mask, 20'000u);
  GrammarState limited(expensive_constraint(), trie, {.work_per_token = 20'000});
  try {
    limited.mask();
    ADD_FAILURE() << "the mask stayed within 20000 steps";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kExceedsCapacity);
    EXPECT_NE(std::string(e.what()).find("more than 20000 matcher steps"), std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(limited.accept(7));  // dead: the request is over
  // A second sequence under the same limit goes on to complete.
  auto cheap = std::make_shared<const Constraint>(parse_gbnf(choice_gbnf({"ab", "abc"})), "");
  GrammarState other(cheap, trie, {.work_per_token = 20'000});
  std::vector<float> logits(vocab.size(), 1.0f);
  EXPECT_EQ(other.apply(logits), 3u);
  ASSERT_TRUE(other.accept(9));  // "abc"
  EXPECT_TRUE(other.complete());
  EXPECT_LT(other.work(), 20'000u);
}

TEST(TokenMask, CancellationStopsTheWalk) {
  const std::vector<std::string> vocab = test_vocab();
  const TokenTrie trie(vocab, {0});
  auto cancelled = std::make_shared<std::atomic<bool>>(false);
  GrammarState state(expensive_constraint(), trie, {}, cancelled);
  cancelled->store(true);
  try {
    state.mask();
    ADD_FAILURE() << "the walk ignored the cancellation";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kCancelled);
  }
  // It stopped at the first poll (every kCheckEvery steps, give or take one new DFA state's
  // charge of ~3600 here), long before the mask's own work.
  EXPECT_LE(state.work(), Matcher::kCheckEvery + 8192);
  GrammarState uncancelled(expensive_constraint(), trie);
  uncancelled.mask();
  EXPECT_GT(uncancelled.work(), 4 * (Matcher::kCheckEvery + 8192));
}

TEST(TokenMask, MatcherMemoryIsBoundedAcrossTokens) {
  // Every byte of [a-z]{0,3000} is a new state: without a bound the matcher keeps them all.
  const std::vector<std::string> vocab = test_vocab();
  const TokenTrie trie(vocab, {0});
  auto counting = std::make_shared<const Constraint>(parse_gbnf("root ::= [a-c]{0,3000}"), "");
  GrammarState bounded(counting, trie, {.matcher_bytes = 64 << 10});
  GrammarState unbounded(counting, trie);
  size_t most = 0;
  for (int i = 0; i < 900; ++i) {
    const int32_t token = i % 3 == 0 ? 9 : 8;  // "abc", "ab", "ab": 7 bytes every 3 tokens
    ASSERT_EQ(bounded.mask().words, unbounded.mask().words) << i;
    most = std::max(most, bounded.footprint());
    ASSERT_TRUE(bounded.accept(token));
    ASSERT_TRUE(unbounded.accept(token));
  }
  EXPECT_GT(unbounded.footprint(), size_t{1} << 20);
  EXPECT_LT(most, size_t{96} << 10);  // the bound plus what one token's walk adds
}

}  // namespace
}  // namespace rapide::grammar
