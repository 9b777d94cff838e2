// The decisions of prompt compression, from scores alone (no model here, so tests can feed
// made-up scores):
//   * words: a passage's tokens grouped into words (a word starts at a token that begins with
//     whitespace, or after one that ends with it), the unit the fine step drops, so no word is cut
//     in half and no UTF-8 character split; a word holding a sentence end (. ! ? or a newline) is
//     never dropped, so sentence boundaries survive;
//   * coarse step (LongLLMLingua): passages ranked by the question's log-likelihood given
//     the passage, kept best first until the target is reached, then while they fit a
//     budget of kCoarseSlack x the target;
//   * fine step (LLMLingua): the words of the kept passages with the least self-information
//     per token are dropped until the kept tokens reach the target.
// Every order is total (ties broken by position), so a given input always gives one plan.
#pragma once

#include <string>
#include <vector>

namespace rapide::compress {

// The coarse step keeps up to this many times the target, so the fine step has words to
// choose from in every kept passage instead of all of the cut falling on passages.
inline constexpr double kCoarseSlack = 1.3;

struct Word {
  int begin = 0, end = 0;  // token range [begin, end) in the passage
  bool sentence_end = false;
};

// Words of a passage from its tokens' text pieces.
std::vector<Word> split_words(const std::vector<std::string>& pieces);

struct PassageScores {
  int tokens = 0;
  double relevance = 0.0;  // log p(question | passage); ignored without a question
  std::vector<Word> words;
  std::vector<float> surprisal;  // per token
};

struct CompressionPlan {
  std::vector<bool> keep_passage;
  std::vector<std::vector<bool>> keep_word;  // per passage, per word
  int context_tokens = 0;
  int kept_tokens = 0;
};

// The plan for keeping about `ratio` of the passages' tokens. `rank_passages`: run the
// coarse step (there is a question); otherwise every passage goes to the fine step.
CompressionPlan plan_compression(const std::vector<PassageScores>& passages, double ratio,
                                 bool rank_passages);

// A kept passage's text: the pieces of its kept words, leading whitespace trimmed when the
// original passage had none (a dropped first word, or SentencePiece's space prefix).
std::string kept_text(const std::vector<std::string>& pieces, const std::vector<Word>& words,
                      const std::vector<bool>& keep_word, bool original_starts_with_space);

}  // namespace rapide::compress
