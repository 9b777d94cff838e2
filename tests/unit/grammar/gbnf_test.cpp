// GBNF parsing and the byte matcher: sentences a grammar must accept and reject, judged by
// hand from the grammar text (the oracle is the grammar's meaning, not rapide's output).
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace rapide::grammar
