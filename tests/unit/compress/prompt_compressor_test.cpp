// The compressor over real story models (../shared/models) and real story text
// (../shared/reference/text/stories-eval.txt, five passages): what the issue promises, that
// instructions and the question survive verbatim, the ratio is met, the output is
// deterministic, small contexts pass through, and the passage holding the answer is kept.
#include <gtest/gtest.h>

#include <sstream>

#include "base/error.h"
#include "base/mapped_file.h"
#include "compress/context_markup.h"
#include "compress/prompt_compressor.h"
#include "formats/model_file.h"
#include "test_paths.h"
#include "unit/compress/story_context.h"

namespace rapide::compress {
namespace {

using namespace testing::story_context;
constexpr const char* kInstruction = "Read the stories, then finish the sentence.\n";

std::shared_ptr<const ModelFile> load(const char* relative) {
  return std::make_shared<const ModelFile>(load_model(testing::shared_path(relative)));
}

std::string marked_prompt() {
  const std::string text = read_text_file(testing::shared_path(kText));
  // The file's paragraphs are separated by blank lines: exactly the passage markup.
  return std::string(kInstruction) + "<context>" + text + "</context>\n" + kQuestion;
}

class PromptCompressorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    RAPIDE_REQUIRE_SHARED(kServed);
    RAPIDE_REQUIRE_SHARED(kText);
    if (!scorer_) scorer_ = std::make_unique<TokenScorer>(load(kServed), 1);
  }
  static void TearDownTestSuite() { scorer_.reset(); }

  CompressionReport run(std::string& prompt, double ratio) {
    std::vector<std::string> texts{prompt};
    CompressionRequest request;
    request.ratio = ratio;
    PromptCompressor compressor(*scorer_);
    const CompressionReport r = compressor.compress(texts, request, 0.0);
    prompt = texts[0];
    return r;
  }
  int scorer_tokens(const std::string& text) const {
    return static_cast<int>(scorer_->tokenizer().encode(text, false).size());
  }

  static std::unique_ptr<TokenScorer> scorer_;
};
std::unique_ptr<TokenScorer> PromptCompressorTest::scorer_;

TEST_F(PromptCompressorTest, InstructionsAndQuestionSurviveVerbatim) {
  for (double ratio : {0.7, 0.5, 0.3}) {
    std::string prompt = marked_prompt();
    const CompressionReport r = run(prompt, ratio);
    EXPECT_TRUE(r.applied) << r.reason;
    EXPECT_TRUE(prompt.starts_with(kInstruction)) << prompt;
    EXPECT_TRUE(prompt.ends_with(std::string("\n") + kQuestion)) << prompt;
    EXPECT_EQ(prompt.find("<context>"), std::string::npos);
    EXPECT_EQ(prompt.find("</context>"), std::string::npos);
  }
}

TEST_F(PromptCompressorTest, TheRatioIsMetWithinATolerance) {
  const std::string original = marked_prompt();
  const std::string context = read_text_file(testing::shared_path(kText));
  for (double ratio : {0.7, 0.5, 0.3}) {
    std::string prompt = original;
    const CompressionReport r = run(prompt, ratio);
    ASSERT_TRUE(r.applied) << r.reason;
    // Measured on the output itself: the context is what lies between the untouched parts.
    const size_t begin = std::string(kInstruction).size();
    const size_t end = prompt.size() - std::string(kQuestion).size() - 1;
    const double kept = static_cast<double>(scorer_tokens(prompt.substr(begin, end - begin))) /
                        scorer_tokens(context);
    EXPECT_NEAR(kept, ratio, 0.08) << "ratio " << ratio << ":\n" << prompt;
    EXPECT_NEAR(static_cast<double>(r.kept_context_tokens) / r.context_tokens, ratio, 0.05);
  }
}

TEST_F(PromptCompressorTest, KeptWordsAreTheOriginalsInTheirOrder) {
  std::string prompt = marked_prompt();
  run(prompt, 0.5);
  const std::string original = assemble(parse_marked_prompt(marked_prompt()));
  std::istringstream words(prompt);
  std::string word;
  size_t at = 0;
  while (words >> word) {
    const size_t found = original.find(word, at);
    ASSERT_NE(found, std::string::npos) << "'" << word << "' is not in the original after " << at;
    at = found + word.size();
  }
}

TEST_F(PromptCompressorTest, TheSameInputGivesTheSameOutput) {
  std::string first = marked_prompt();
  std::string second = marked_prompt();
  run(first, 0.4);
  // A fresh scorer too: nothing carried between calls decides.
  TokenScorer other(load(kServed), 2);
  std::vector<std::string> texts{second};
  CompressionRequest request;
  request.ratio = 0.4;
  PromptCompressor(other).compress(texts, request, 0.0);
  EXPECT_EQ(first, texts[0]);
}

TEST_F(PromptCompressorTest, EmptyAndTinyContextsPassThroughUntouched) {
  for (const std::string& prompt :
       {std::string("Say hi.<context></context> Now."),
        std::string("A<context>Tim ran.</context>B"), std::string("no context at all")}) {
    std::string out = prompt;
    const CompressionReport r = run(out, 0.3);
    EXPECT_FALSE(r.applied);
    EXPECT_FALSE(r.reason.empty());
    EXPECT_EQ(out, assemble(parse_marked_prompt(prompt)));
  }
  std::string whole = marked_prompt();
  const CompressionReport r = run(whole, 1.0);
  EXPECT_FALSE(r.applied);
  EXPECT_EQ(whole, assemble(parse_marked_prompt(marked_prompt())));
}

TEST_F(PromptCompressorTest, ThePassageHoldingTheAnswerIsKept) {
  std::string prompt = marked_prompt();
  const CompressionReport r = run(prompt, 0.3);
  EXPECT_LT(r.kept_passages, r.passages);
  EXPECT_NE(prompt.find("Ben"), std::string::npos) << prompt;
  EXPECT_NE(prompt.find("tower"), std::string::npos) << prompt;
}

TEST_F(PromptCompressorTest, ACostlyCompressionIsSwitchedOffUnlessForced) {
  std::string prompt = marked_prompt();
  std::vector<std::string> texts{prompt};
  CompressionRequest request;
  request.ratio = 0.5;
  // A prefill far cheaper than scoring: compressing cannot pay.
  const double cheap_prefill = scorer_->seconds_per_token() / 100.0;
  CompressionReport r = PromptCompressor(*scorer_).compress(texts, request, cheap_prefill);
  EXPECT_FALSE(r.applied);
  EXPECT_NE(r.reason.find("would cost"), std::string::npos) << r.reason;
  EXPECT_EQ(texts[0], assemble(parse_marked_prompt(prompt)));
  request.force = true;
  texts = {prompt};
  r = PromptCompressor(*scorer_).compress(texts, request, cheap_prefill);
  EXPECT_TRUE(r.applied);
}

TEST_F(PromptCompressorTest, ASmallerScorerWithAnotherVocabularyWorksOnTheText) {
  RAPIDE_REQUIRE_SHARED(kSmall);
  TokenScorer small(load(kSmall), 1);
  ASSERT_NE(small.tokenizer().vocab_size(), scorer_->tokenizer().vocab_size());
  std::vector<std::string> texts{marked_prompt()};
  CompressionRequest request;
  request.ratio = 0.5;
  const CompressionReport r = PromptCompressor(small).compress(texts, request, 0.0);
  EXPECT_TRUE(r.applied) << r.reason;
  EXPECT_TRUE(texts[0].starts_with(kInstruction));
  EXPECT_TRUE(texts[0].ends_with(kQuestion));
  EXPECT_NEAR(static_cast<double>(r.kept_context_tokens) / r.context_tokens, 0.5, 0.05);
}

TEST_F(PromptCompressorTest, ACachedPassageScoresLikeAFreshOne) {
  const std::string passage = "Tim had a new red ball. He threw it to his dog, and the dog ran.";
  TokenScorer fresh(load(kServed), 1);
  const ScoredPassage cold = fresh.score(passage, kQuestion);
  EXPECT_TRUE(fresh.cached(passage));
  const ScoredPassage warm = fresh.score(passage, kQuestion);
  const ScoredPassage other = fresh.score(passage, "Where did the dog run to after the ball?");
  EXPECT_EQ(cold.tokens, warm.tokens);
  EXPECT_EQ(cold.surprisal, warm.surprisal);
  EXPECT_EQ(cold.question_logprob, warm.question_logprob);
  EXPECT_NE(other.question_logprob, warm.question_logprob);
  // A scorer that never cached anything agrees with the second question too.
  TokenScorer again(load(kServed), 1, /*cache_bytes=*/0);
  EXPECT_EQ(again.score(passage, "Where did the dog run to after the ball?").question_logprob,
            other.question_logprob);
  EXPECT_LT(cold.question_logprob, 0.0);
  fresh.clear_cache();
  EXPECT_FALSE(fresh.cached(passage));
}

TEST_F(PromptCompressorTest, ARatioOutsideTheRangeIsRefused) {
  for (double ratio : {0.0, -0.5, 1.5}) {
    std::string prompt = marked_prompt();
    EXPECT_THROW(run(prompt, ratio), Error) << ratio;
  }
}

}  // namespace
}  // namespace rapide::compress
