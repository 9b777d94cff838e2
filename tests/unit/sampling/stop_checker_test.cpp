// StopChecker: stop strings split across pieces, false starts, overlapping prefixes, several
// stop strings, UTF-8 safety, and equivalence with searching the whole text at once.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "sampling/stop_checker.h"

namespace rapide {
namespace {

struct Streamed {
  std::vector<std::string> emitted;  // per piece
  std::string text;                  // everything emitted, flush included when not stopped
  bool stopped = false;
  int stop_index = -1;
};

Streamed stream(const std::vector<std::string>& stops, const std::vector<std::string>& pieces) {
  StopChecker checker(stops);
  Streamed out;
  for (const std::string& piece : pieces) {
    StopOutput o = checker.push(piece);
    out.emitted.push_back(o.text);
    out.text += o.text;
    if (o.stopped) {
      out.stopped = true;
      out.stop_index = o.stop_index;
    }
  }
  if (!out.stopped) out.text += checker.flush();
  return out;
}

TEST(StopCheckerTest, WithoutStopStringsEverythingPassesThrough) {
  const Streamed s = stream({}, {"Hello", " wor", "ld"});
  EXPECT_EQ(s.emitted, (std::vector<std::string>{"Hello", " wor", "ld"}));
  EXPECT_FALSE(s.stopped);
}

TEST(StopCheckerTest, StopInsideOnePieceDropsTheStopAndTheRest) {
  const Streamed s = stream({"STOP"}, {"Hello STOP world"});
  EXPECT_EQ(s.emitted, (std::vector<std::string>{"Hello "}));
  EXPECT_TRUE(s.stopped);
  EXPECT_EQ(s.stop_index, 0);
}

TEST(StopCheckerTest, StopSplitAcrossPiecesIsHeldBack) {
  const Streamed s = stream({"STOP"}, {"Hel", "lo S", "TO", "P more"});
  EXPECT_EQ(s.emitted, (std::vector<std::string>{"Hel", "lo ", "", ""}));
  EXPECT_TRUE(s.stopped);
  EXPECT_EQ(s.text, "Hello ");
}

TEST(StopCheckerTest, FalseStartIsReleased) {
  const Streamed s = stream({"STOP"}, {"a ST", "AR b"});
  EXPECT_EQ(s.emitted, (std::vector<std::string>{"a ", "STAR b"}));
  EXPECT_FALSE(s.stopped);
}

TEST(StopCheckerTest, OverlappingPrefixes) {
  // "abcab" could start "abcabd"; then "cabd" shows the real match starts at offset 3.
  const Streamed s = stream({"abcabd"}, {"abcab", "cabd", "tail"});
  EXPECT_EQ(s.emitted[0], "");
  EXPECT_EQ(s.text, "abc");
  EXPECT_TRUE(s.stopped);
  // Held text that stops being a prefix is released only up to the next possible start.
  const Streamed partial = stream({"aab"}, {"aaaa", "c"});
  EXPECT_EQ(partial.emitted, (std::vector<std::string>{"aa", "aac"}));
}

TEST(StopCheckerTest, EarliestOfSeveralStopStringsWins) {
  const Streamed s = stream({"world", "lo w"}, {"hel", "lo world"});
  EXPECT_EQ(s.text, "hel");
  EXPECT_EQ(s.stop_index, 1);
  // Equal positions: the first listed.
  const Streamed same = stream({"ab", "abc"}, {"xabc"});
  EXPECT_EQ(same.text, "x");
  EXPECT_EQ(same.stop_index, 0);
}

TEST(StopCheckerTest, FlushReturnsHeldTextAndNothingFollowsAStop) {
  StopChecker checker({"STOP"});
  EXPECT_EQ(checker.push("abc ST").text, "abc ");
  EXPECT_EQ(checker.held_bytes(), 2u);
  EXPECT_EQ(checker.flush(), "ST");

  StopChecker stopped({"x"});
  EXPECT_TRUE(stopped.push("axb").stopped);
  EXPECT_TRUE(stopped.stopped());
  const StopOutput after = stopped.push("more");
  EXPECT_EQ(after.text, "");
  EXPECT_EQ(stopped.flush(), "");
}

TEST(StopCheckerTest, NeverEmitsPartOfAUtf8Character) {
  // "€" is E2 82 AC; a piece ending mid-character holds the lead bytes back.
  const Streamed s = stream({"STOP"}, {"x\xE2\x82", "\xAC y"});
  EXPECT_EQ(s.emitted, (std::vector<std::string>{"x", "\xE2\x82\xAC y"}));
  // A 4-byte character split 1 + 3.
  const Streamed emoji = stream({}, {"\xF0", "\x9F\x98\x80!"});
  EXPECT_EQ(emoji.emitted, (std::vector<std::string>{"", "\xF0\x9F\x98\x80!"}));
}

TEST(StopCheckerTest, Utf8StopStringSplitMidCharacter) {
  // Stop "é!" (C3 A9 21) arriving as "caf" + C3 | A9 "!".
  const Streamed s = stream({"\xC3\xA9!"}, {"caf\xC3", "\xA9! more"});
  EXPECT_EQ(s.emitted, (std::vector<std::string>{"caf", ""}));
  EXPECT_TRUE(s.stopped);
  // "é" followed by something else is released whole.
  const Streamed other = stream({"\xC3\xA9!"}, {"caf\xC3", "\xA9", "s"});
  EXPECT_EQ(other.emitted, (std::vector<std::string>{"caf", "", "\xC3\xA9s"}));
}

TEST(StopCheckerTest, StreamingEqualsWholeTextSearch) {
  const std::vector<std::string> stops = {"</s>", "\n\nUser:", "ab", "b\xC3\xA9"};
  std::mt19937_64 rng(17);
  const std::string alphabet[] = {"a", "b", "<", "/", "s", ">", "\n", "User:", "\xC3\xA9", " "};
  for (int trial = 0; trial < 2000; ++trial) {
    std::string text;
    const int length = static_cast<int>(rng() % 30);
    for (int i = 0; i < length; ++i) text += alphabet[rng() % 10];
    std::string expected = text;
    bool expect_stop = false;
    size_t first = std::string::npos;
    for (const std::string& stop : stops) first = std::min(first, text.find(stop));
    if (first != std::string::npos) {
      expected = text.substr(0, first);
      expect_stop = true;
    }
    std::vector<std::string> pieces;
    for (size_t pos = 0; pos < text.size();) {
      const size_t len = 1 + rng() % 4;
      pieces.push_back(text.substr(pos, len));
      pos += len;
    }
    const Streamed s = stream(stops, pieces);
    ASSERT_EQ(s.text, expected) << "text '" << text << "'";
    ASSERT_EQ(s.stopped, expect_stop) << "text '" << text << "'";
  }
}

TEST(StopCheckerTest, RejectsEmptyStopString) {
  EXPECT_THROW(StopChecker({"ok", ""}), Error);
}

// The string that matched is reported (vLLM's stop_reason, Anthropic's stop_sequence,
// llama-server's stopping_word): the earliest occurrence, not the first listed.
TEST(StopCheckerTest, ReportsWhichStopStringMatched) {
  StopChecker checker({"END", "park", "x"});
  EXPECT_EQ(checker.matched(), "");
  EXPECT_EQ(checker.push("to the pa").text, "to the ");
  EXPECT_EQ(checker.matched(), "");
  const StopOutput out = checker.push("rk. END x");
  EXPECT_TRUE(out.stopped);
  EXPECT_EQ(checker.matched(), "park");
  StopChecker unstopped({"END"});
  unstopped.push("no stop here");
  unstopped.flush();
  EXPECT_EQ(unstopped.matched(), "");
}

}  // namespace
}  // namespace rapide
