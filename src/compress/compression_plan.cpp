#include "compress/compression_plan.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace rapide::compress {

namespace {

bool starts_with_space(const std::string& piece) {
  return !piece.empty() &&
         (piece[0] == ' ' || piece[0] == '\n' || piece[0] == '\t' || piece[0] == '\r');
}

bool ends_with_space(const std::string& piece) {
  return !piece.empty() && (piece.back() == ' ' || piece.back() == '\n' || piece.back() == '\t' ||
                            piece.back() == '\r');
}

bool holds_sentence_end(const std::string& piece) {
  return piece.find_first_of(".!?\n") != std::string::npos;
}

}  // namespace

std::vector<Word> split_words(const std::vector<std::string>& pieces) {
  std::vector<Word> words;
  for (int i = 0; i < static_cast<int>(pieces.size()); ++i) {
    // Vocabularies put the space before a word (SentencePiece, GPT-2) or after it
    // (TinyStories-656K's "walked "): a word boundary is whitespace on either side.
    const bool after_space = i > 0 && ends_with_space(pieces[i - 1]);
    if (words.empty() || starts_with_space(pieces[i]) || after_space) {
      words.push_back({i, i, false});
    }
    Word& w = words.back();
    w.end = i + 1;
    w.sentence_end = w.sentence_end || holds_sentence_end(pieces[i]);
  }
  return words;
}

CompressionPlan plan_compression(const std::vector<PassageScores>& passages, double ratio,
                                 bool rank_passages) {
  CompressionPlan plan;
  const size_t n = passages.size();
  plan.keep_passage.assign(n, !rank_passages);
  plan.keep_word.resize(n);
  for (size_t p = 0; p < n; ++p) {
    plan.keep_word[p].assign(passages[p].words.size(), true);
    plan.context_tokens += passages[p].tokens;
  }
  const int target = static_cast<int>(std::ceil(std::clamp(ratio, 0.0, 1.0) * plan.context_tokens));

  // Coarse: the most relevant passages first, each kept while the target is not reached
  // (the fine step trims the excess) or when it fits the slack budget. Relevance is a sum
  // over the same question tokens, so it compares across passages.
  int kept = rank_passages ? 0 : plan.context_tokens;
  if (rank_passages) {
    std::vector<size_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return passages[a].relevance > passages[b].relevance;
    });
    const double budget = kCoarseSlack * target;
    for (size_t p : order) {
      if (kept < target || kept + passages[p].tokens <= budget) {
        plan.keep_passage[p] = true;
        kept += passages[p].tokens;
      }
    }
  }

  // Fine: words of kept passages by self-information per token, lowest first.
  struct Candidate {
    double density;
    size_t passage, word;
  };
  std::vector<Candidate> candidates;
  for (size_t p = 0; p < n; ++p) {
    if (!plan.keep_passage[p]) continue;
    const PassageScores& s = passages[p];
    for (size_t w = 0; w < s.words.size(); ++w) {
      const Word& word = s.words[w];
      if (word.sentence_end) continue;
      double sum = 0.0;
      for (int t = word.begin; t < word.end; ++t) sum += s.surprisal[static_cast<size_t>(t)];
      candidates.push_back({sum / std::max(1, word.end - word.begin), p, w});
    }
  }
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const Candidate& a, const Candidate& b) { return a.density < b.density; });
  for (const Candidate& c : candidates) {
    if (kept <= target) break;
    const Word& word = passages[c.passage].words[c.word];
    plan.keep_word[c.passage][c.word] = false;
    kept -= word.end - word.begin;
  }
  plan.kept_tokens = kept;
  return plan;
}

std::string kept_text(const std::vector<std::string>& pieces, const std::vector<Word>& words,
                      const std::vector<bool>& keep_word, bool original_starts_with_space) {
  std::string text;
  for (size_t w = 0; w < words.size(); ++w) {
    if (!keep_word[w]) continue;
    for (int t = words[w].begin; t < words[w].end; ++t) {
      std::string_view piece = pieces[static_cast<size_t>(t)];
      // A dropped word between two spaces would leave both: keep one.
      if (t == words[w].begin && !text.empty() && text.back() == ' ' && piece.starts_with(' ')) {
        piece.remove_prefix(1);
      }
      text += piece;
    }
  }
  if (!original_starts_with_space) {
    const size_t first = text.find_first_not_of(" \t\r\n");
    text.erase(0, first == std::string::npos ? text.size() : first);
  }
  return text;
}

}  // namespace rapide::compress
