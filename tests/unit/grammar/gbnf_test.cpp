// GBNF parsing and the byte matcher: sentences a grammar must accept and reject, judged by
// hand from the grammar text (the oracle is the grammar's meaning, not rapide's output).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <string>

#include "base/error.h"
#include "grammar/gbnf.h"
#include "grammar/matcher.h"
#include "unit/grammar/grammar_matches.h"

namespace rapide::grammar {
namespace {

TEST(Gbnf, LiteralsClassesAndAlternatives) {
  const Grammar g = parse_gbnf(R"(root ::= "yes" | "no" | [0-9]+ "!"?)");
  expect_language(g, {"yes", "no", "123", "7!"}, {"ye", "", "!"});
  EXPECT_TRUE(viable(g, "ye"));
  EXPECT_FALSE(viable(g, "yes!"));
}

TEST(Gbnf, RulesGroupsCommentsAndNewlines) {
  const Grammar g = parse_gbnf(R"(
# a list of words
root ::= word ("," ws word)*   # comma separated
word ::= [a-z]+
ws   ::= (
  " " |
  "\t"
)?
)");
  expect_language(g, {"a", "ab, cd,ef,\tg"}, {"ab,", "ab,  cd", "Ab"});
}

TEST(Gbnf, BoundedRepetitions) {
  const Grammar g = parse_gbnf(R"(root ::= "a"{2} "b"{1,3} "c"{2,})");
  expect_language(g, {"aabcc", "aabbbccccc"}, {"abcc", "aabbbbcc", "aabc"});
}

TEST(Gbnf, NegatedClassAndUnicodeAreUtf8Bytes) {
  const Grammar g = parse_gbnf(R"(root ::= "\"" [^"\\]* "\"" | "é" | [α-ω])");
  expect_language(g, {"\"héllo 世界\"", "é", "λ"}, {"\"a\"b\"", "A"});
  // Half a character is a viable prefix, a broken sequence is not.
  EXPECT_TRUE(viable(g, "\xCE"));
  EXPECT_FALSE(viable(g, "\xCE\x41"));
}

TEST(Gbnf, AnyCharAndEscapes) {
  const Grammar g = parse_gbnf(R"(root ::= . "\n" "\x41" "\u00e9")");
  expect_language(g, {"z\nAé", "€\nAé"}, {"zz\nAé"});
}

TEST(Gbnf, CompleteOnlyWhenNothingCanFollow) {
  const Grammar g = parse_gbnf(R"(root ::= "a" "b"?)");
  Matcher m(g);
  MatchState s = m.initial();
  ASSERT_TRUE(m.advance(s, "a"));
  EXPECT_TRUE(s.accepts);
  EXPECT_FALSE(s.complete());
  ASSERT_TRUE(m.advance(s, "b"));
  EXPECT_TRUE(s.complete());
}

TEST(Gbnf, RecursionIsAllowedOnTheRight) {
  const Grammar g = parse_gbnf(R"(
root ::= list
list ::= "[" (item ("," item)*)? "]"
item ::= list | [0-9]
)");
  EXPECT_TRUE(matches(g, "[1,[2,[]],3]"));
  EXPECT_FALSE(matches(g, "[1,[2]"));
}

TEST(Gbnf, StateKeysIgnoreNodeNumbering) {
  const Grammar g = parse_gbnf(R"(root ::= ("a" | "b")* "c")");
  Matcher m1(g), m2(g);
  MatchState s1 = m1.initial(), s2 = m2.initial();
  ASSERT_TRUE(m1.advance(s1, "ab"));
  ASSERT_TRUE(m2.advance(s2, "b"));
  EXPECT_EQ(m1.key(s1), m2.key(s2));
  ASSERT_TRUE(m2.advance(s2, "c"));
  EXPECT_NE(m1.key(s1), m2.key(s2));
}

TEST(Gbnf, ErrorsNameTheProblem) {
  auto message = [](std::string_view text) {
    try {
      parse_gbnf(text);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("root ::= foo").find("'foo' is used but not defined"), std::string::npos);
  EXPECT_NE(message("root ::= root \"a\"").find("left-recursive"), std::string::npos);
  EXPECT_NE(message("root ::= \"abc").find("unterminated literal"), std::string::npos);
  EXPECT_NE(message("item ::= \"a\"").find("no 'root' rule"), std::string::npos);
  EXPECT_NE(message("root ::= [a-z\n").find("line"), std::string::npos);
  EXPECT_NE(message("root ::= (\"a\"").find("expected ')'"), std::string::npos);
  EXPECT_NE(message("root ::= \"a\" ::=").find("line 1"), std::string::npos);
}

// A request's grammar is untrusted: what would overflow the stack or ask for unbounded memory
// is refused with an error, and what is merely long or ambiguous is handled without recursion
// or exponential work.
TEST(Gbnf, DeepOrHugeGrammarsAreRefused) {
  auto message = [](const std::string& text) {
    try {
      parse_gbnf(text);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      return std::string(e.what());
    }
    return std::string("no error");
  };
  auto nested = [](int depth) {
    return "root ::= " + std::string(static_cast<size_t>(depth), '(') + "\"a\"" +
           std::string(static_cast<size_t>(depth), ')');
  };
  EXPECT_TRUE(matches(parse_gbnf(nested(200)), "a"));
  // 100,000 levels overflowed the parser's stack before the limit.
  EXPECT_NE(message(nested(100000)).find("nested deeper than 256"), std::string::npos);
  std::string many = "root ::=";
  for (int i = 0; i < 300; ++i) many += " \"a\"{0,10000}";  // 6 million elements unrolled
  EXPECT_NE(message(many).find("unroll into more than"), std::string::npos);
  EXPECT_EQ(message("root ::= \"a\"{0,10000} \"b\"{10000}"), "no error");
}

TEST(Gbnf, LongChainsOfRulesNeedNoRecursion) {
  // r0 ::= r1 "a", r1 ::= r2 "a", ...: the left-recursion check and the matcher's expansion
  // follow 100,000 leading references (recursion per reference overflowed the stack).
  constexpr int kRules = 100000;
  std::string text = "root ::= r0\n";
  for (int i = 0; i < kRules; ++i) text += fmt::format("r{} ::= r{}? \"a\"\n", i, i + 1);
  text += fmt::format("r{} ::= \"b\"\n", kRules);
  const Grammar g = parse_gbnf(text);
  EXPECT_TRUE(matches(g, "a"));
  EXPECT_TRUE(matches(g, "aaaa"));
  EXPECT_FALSE(matches(g, "baaa"));  // "b" needs all 100,000 rules: then 100,000 "a"s follow
  EXPECT_TRUE(matches(g, "b" + std::string(kRules, 'a')));
  EXPECT_FALSE(matches(g, "ab"));
  // Every rule nullable only through the next one, listed so that a sweep over the rules in
  // order learns one per pass (quadratic before the worklist): the last rule is nullable.
  std::string chain = "root ::= c0 \"x\"\n";
  for (int i = 0; i < kRules; ++i) chain += fmt::format("c{} ::= c{}\n", i, i + 1);
  chain += fmt::format("c{} ::= \"y\"?\n", kRules);
  const Grammar c = parse_gbnf(chain);
  EXPECT_TRUE(matches(c, "x"));
  EXPECT_TRUE(matches(c, "yx"));
}

TEST(Gbnf, AmbiguousAlternativesExpandOnce) {
  // x0 ::= x1 | x1, x1 ::= x2 | x2, ...: 2^64 derivations of one stack; each (position,
  // parent) is expanded once, so this takes microseconds instead of forever.
  std::string text = "root ::= x0 \"!\"\n";
  for (int i = 0; i < 64; ++i) text += fmt::format("x{} ::= x{} | x{}\n", i, i + 1, i + 1);
  text += "x64 ::= \"a\"*\n";
  const Grammar g = parse_gbnf(text);
  Matcher m(g);
  MatchState s = m.initial();
  EXPECT_EQ(s.stacks.size(), 2u);  // "a" inside x64's loop, or the "!" after it
  EXPECT_TRUE(m.advance(s, "aaa"));
  EXPECT_EQ(s.stacks.size(), 2u);
  EXPECT_TRUE(m.advance(s, "!"));
  EXPECT_TRUE(s.complete());
}

}  // namespace
}  // namespace rapide::grammar
