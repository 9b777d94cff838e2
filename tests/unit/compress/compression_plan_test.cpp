// compression_plan.h and compression_cost.h from made-up scores: which words and passages go.
#include <gtest/gtest.h>

#include "compress/compression_cost.h"
#include "compress/compression_plan.h"

namespace rapide::compress {
namespace {

TEST(SplitWords, ASpaceAfterAPieceEndsTheWordToo) {
  // TinyStories-656K's vocabulary: "walked " "down the " "hill" ". Then " "Mia".
  const std::vector<std::string> pieces{"walked ", "down the ", "hill", ". Then ", "Mia"};
  const std::vector<Word> words = split_words(pieces);
  ASSERT_EQ(words.size(), 4u);
  EXPECT_EQ(words[2].begin, 2);
  EXPECT_EQ(words[2].end, 4);  // "hill. Then "
  EXPECT_TRUE(words[2].sentence_end);
  EXPECT_EQ(words[3].begin, 4);
}

TEST(SplitWords, WordsStartAtWhitespaceAndNewlinesEndThem) {
  // " Lily" "," " the" " d" "og" "." "\n" "Then"
  const std::vector<std::string> pieces{" Lily", ",", " the", " d", "og", ".", "\n", "Then"};
  const std::vector<Word> words = split_words(pieces);
  ASSERT_EQ(words.size(), 5u);
  EXPECT_EQ(words[0].begin, 0);
  EXPECT_EQ(words[0].end, 2);  // " Lily,"
  EXPECT_FALSE(words[0].sentence_end);
  EXPECT_EQ(words[2].begin, 3);
  EXPECT_EQ(words[2].end, 6);  // " dog."
  EXPECT_TRUE(words[2].sentence_end);
  EXPECT_TRUE(words[3].sentence_end);  // "\n"
  EXPECT_EQ(words[4].begin, 7);        // a new word after the newline
}

// A passage of `n` one-token words with the given surprisals; the last word ends a sentence.
PassageScores passage(std::vector<float> surprisal, double relevance) {
  PassageScores p;
  p.tokens = static_cast<int>(surprisal.size());
  p.relevance = relevance;
  for (int i = 0; i < p.tokens; ++i) p.words.push_back({i, i + 1, i + 1 == p.tokens});
  p.surprisal = std::move(surprisal);
  return p;
}

TEST(PlanCompression, FineStepDropsTheLeastInformativeWordsDownToTheTarget) {
  const std::vector<PassageScores> passages{passage({5, 1, 4, 2, 9, 3, 8, 7, 6, 0.5f}, 0)};
  const CompressionPlan plan = plan_compression(passages, 0.5, /*rank_passages=*/false);
  EXPECT_EQ(plan.context_tokens, 10);
  EXPECT_EQ(plan.kept_tokens, 5);
  // Dropped: 1, 2, 3, 4, 5 (the last word, 0.5, ends the sentence and stays).
  const std::vector<bool> expected{false, false, false, false, true, false, true, true, true, true};
  EXPECT_EQ(plan.keep_word[0], expected);
}

TEST(PlanCompression, SentenceEndsSurviveEvenWhenTheTargetCannotBeMet) {
  PassageScores p = passage({1, 1, 1, 1}, 0);
  for (Word& w : p.words) w.sentence_end = true;
  const CompressionPlan plan = plan_compression({p}, 0.25, false);
  EXPECT_EQ(plan.kept_tokens, 4);
  EXPECT_EQ(plan.keep_word[0], std::vector<bool>(4, true));
}

TEST(PlanCompression, CoarseStepKeepsTheMostRelevantPassagesWithinTheBudget) {
  // Four passages of 10 tokens; relevance ranks passage 2, then 0. Ratio 0.25 -> target 10,
  // budget 13: only the best passage fits, and it is then cut to the target... it is
  // exactly the target already.
  std::vector<PassageScores> passages;
  const double relevance[] = {-20, -50, -5, -40};
  for (double r : relevance) passages.push_back(passage(std::vector<float>(10, 2.0f), r));
  const CompressionPlan plan = plan_compression(passages, 0.25, /*rank_passages=*/true);
  EXPECT_EQ(plan.keep_passage, (std::vector<bool>{false, false, true, false}));
  EXPECT_EQ(plan.kept_tokens, 10);
  // Ratio 0.5 -> target 20, budget 26: passages 2 and 0, nothing left for the fine step.
  const CompressionPlan half = plan_compression(passages, 0.5, true);
  EXPECT_EQ(half.keep_passage, (std::vector<bool>{true, false, true, false}));
  EXPECT_EQ(half.kept_tokens, 20);
}

TEST(PlanCompression, TheBestPassageIsKeptEvenWhenLargerThanTheBudget) {
  std::vector<PassageScores> passages{passage(std::vector<float>(40, 1.0f), -1),
                                      passage(std::vector<float>(4, 1.0f), -9)};
  const CompressionPlan plan = plan_compression(passages, 0.2, true);
  EXPECT_TRUE(plan.keep_passage[0]);
  EXPECT_FALSE(plan.keep_passage[1]);
  EXPECT_EQ(plan.kept_tokens, 9);  // ceil(0.2 * 44), cut from the best passage
}

TEST(PlanCompression, TiesAreBrokenByPositionSoThePlanIsDeterministic) {
  const std::vector<PassageScores> passages{passage(std::vector<float>(8, 1.0f), 0)};
  const CompressionPlan plan = plan_compression(passages, 0.5, false);
  // Equal scores: the earliest words go first.
  const std::vector<bool> expected{false, false, false, false, true, true, true, true};
  EXPECT_EQ(plan.keep_word[0], expected);
}

TEST(KeptText, JoinsKeptWordsAndTrimsALeadingSpaceTheOriginalLacked) {
  const std::vector<std::string> pieces{" Once", " upon", " a", " time", "."};
  const std::vector<Word> words = split_words(pieces);
  EXPECT_EQ(kept_text(pieces, words, {false, true, false, true}, false), "upon time.");
  EXPECT_EQ(kept_text(pieces, words, {false, true, false, true}, true), " upon time.");
  // Space after and before a word: dropping "b" leaves one space, not two.
  const std::vector<std::string> spaced{"a ", " ", "b", " c."};
  EXPECT_EQ(kept_text(spaced, split_words(spaced), {true, false, false, true}, false), "a c.");
}

TEST(CompressionCost, ScoringEveryTokenAgainstThePrefillOfTheDroppedOnes) {
  // 1000 context tokens in 4 passages, 9-token question: 1000 + 4 * 10 = 1040 scored tokens.
  const CompressionCost cheap = estimate_compression_cost(1000, 1000, 4, 9, 0.5, 1e-5, 1e-4);
  EXPECT_DOUBLE_EQ(cheap.scoring_seconds, 1040 * 1e-5);
  EXPECT_DOUBLE_EQ(cheap.saved_seconds, 500 * 1e-4);
  EXPECT_TRUE(cheap.worth_it());
  // A scorer as costly as the served model never pays, unless the passages are cached:
  // then only the questions run (4 * 10 tokens).
  EXPECT_FALSE(estimate_compression_cost(1000, 1000, 4, 9, 0.5, 1e-4, 1e-4).worth_it());
  const CompressionCost warm = estimate_compression_cost(1000, 0, 4, 9, 0.5, 1e-4, 1e-4);
  EXPECT_DOUBLE_EQ(warm.scoring_seconds, 40 * 1e-4);
  EXPECT_TRUE(warm.worth_it());
}

}  // namespace
}  // namespace rapide::compress
