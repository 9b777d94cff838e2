// context_markup.h: how prompts mark the compressible context.
#include <gtest/gtest.h>

#include "base/error.h"
#include "compress/context_markup.h"

namespace rapide::compress {
namespace {

TEST(ContextMarkup, SplitsSpansIntoPassagesAtBlankLines) {
  const MarkedPrompt m =
      parse_marked_prompt("Read.\n<context>A a.\n\nB b.\n\n\nC c.</context>\nQ?");
  const std::vector<size_t> passages = m.passage_indices();
  ASSERT_EQ(passages.size(), 3u);
  EXPECT_EQ(m.pieces[passages[0]].text, "A a.");
  EXPECT_EQ(m.pieces[passages[2]].text, "C c.");
  EXPECT_EQ(assemble(m), "Read.\nA a.\n\nB b.\n\n\nC c.\nQ?");
}

TEST(ContextMarkup, ADroppedPassageTakesOneSeparatorWithIt) {
  const MarkedPrompt m = parse_marked_prompt("<context>A.\n\nB.\n\nC.</context>Q");
  EXPECT_EQ(assemble(m, {"A.", "", "C."}), "A.\n\nC.Q");
  EXPECT_EQ(assemble(m, {"", "B.", "C."}), "B.\n\nC.Q");
  EXPECT_EQ(assemble(m, {"A.", "B.", ""}), "A.\n\nB.Q");
  EXPECT_EQ(assemble(m, {"", "", ""}), "Q");
}

TEST(ContextMarkup, SeveralSpansKeepTheTextBetweenThem) {
  const MarkedPrompt m = parse_marked_prompt("x<context>A.</context>y<context>B.\n\nC.</context>z");
  EXPECT_EQ(m.passage_indices().size(), 3u);
  EXPECT_EQ(assemble(m, {"", "B.", ""}), "xyB.z");
}

TEST(ContextMarkup, MalformedDelimitersAreInvalidArguments) {
  for (const char* bad : {"<context>open", "stray</context>", "<context>a<context>b</context>"}) {
    try {
      parse_marked_prompt(bad);
      ADD_FAILURE() << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << bad;
    }
  }
}

TEST(ContextMarkup, NoContextMeansNoPassages) {
  const MarkedPrompt m = parse_marked_prompt("just a prompt");
  EXPECT_FALSE(m.has_context());
  EXPECT_EQ(assemble(m), "just a prompt");
}

TEST(ContextMarkup, TheQuestionIsTheTextAfterTheLastContext) {
  EXPECT_EQ(text_after_context("<context>a</context>\n  Where is Tim?\n"), "Where is Tim?");
  EXPECT_EQ(text_after_context("no context"), "");
  EXPECT_EQ(text_after_context("<context>a</context>\n"), "");
}

}  // namespace
}  // namespace rapide::compress
