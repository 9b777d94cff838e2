#include "compress/prompt_compressor.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "base/clock.h"
#include "base/error.h"
#include "compress/compression_plan.h"
#include "compress/context_markup.h"

namespace rapide::compress {

CompressionReport PromptCompressor::compress(std::vector<std::string>& texts,
                                             const CompressionRequest& request,
                                             double prefill_seconds_per_token) {
  const TimePoint start = Clock::now();
  if (!(request.ratio > 0.0 && request.ratio <= 1.0)) {
    fail(ErrorCode::kInvalidArgument, "the compression ratio must be in (0, 1], got {}",
         request.ratio);
  }
  CompressionReport report;
  std::vector<MarkedPrompt> marked;
  std::vector<std::string> originals;  // every passage, across the texts, in order
  std::string question = request.question;
  for (const std::string& text : texts) {
    marked.push_back(parse_marked_prompt(text));
    for (size_t i : marked.back().passage_indices()) {
      originals.push_back(marked.back().pieces[i].text);
    }
    if (request.question.empty() && marked.back().has_context()) {
      question = text_after_context(text);
    }
  }
  report.passages = static_cast<int>(originals.size());
  report.kept_passages = report.passages;
  const Tokenizer& tokenizer = scorer_.tokenizer();
  int uncached_tokens = 0;
  for (const std::string& p : originals) {
    const int tokens = static_cast<int>(tokenizer.encode(p, false).size());
    report.context_tokens += tokens;
    if (!scorer_.cached(p)) uncached_tokens += tokens;
  }
  report.kept_context_tokens = report.context_tokens;

  std::vector<std::string> kept = originals;
  auto write_back = [&] {
    size_t next = 0;
    for (size_t t = 0; t < texts.size(); ++t) {
      const size_t count = marked[t].passage_indices().size();
      texts[t] = assemble(
          marked[t], std::vector<std::string>(kept.begin() + next, kept.begin() + next + count));
      next += count;
    }
    report.seconds = seconds_between(start, Clock::now());
    return report;
  };
  if (originals.empty()) {
    report.reason = "no marked context";
    return write_back();
  }
  if (request.ratio >= 1.0) {
    report.reason = "ratio 1";
    return write_back();
  }
  if (report.context_tokens < kMinContextTokens) {
    report.reason =
        fmt::format("context of {} tokens is under {}", report.context_tokens, kMinContextTokens);
    return write_back();
  }
  if (prefill_seconds_per_token > 0.0) {
    const int question_tokens = static_cast<int>(tokenizer.encode(question, false).size());
    report.cost = estimate_compression_cost(report.context_tokens, uncached_tokens, report.passages,
                                            question_tokens, request.ratio,
                                            scorer_.seconds_per_token(), prefill_seconds_per_token);
    if (!request.force && !report.cost.worth_it()) {
      report.reason =
          fmt::format("scoring would cost {:.1f} ms to save {:.1f} ms of prefill",
                      report.cost.scoring_seconds * 1e3, report.cost.saved_seconds * 1e3);
      return write_back();
    }
  }

  std::vector<PassageScores> scores(originals.size());
  std::vector<std::vector<std::string>> pieces(originals.size());
  for (size_t p = 0; p < originals.size(); ++p) {
    ScoredPassage scored = scorer_.score(originals[p], question);
    for (int32_t id : scored.tokens) pieces[p].push_back(tokenizer.token_to_piece(id));
    scores[p].tokens = static_cast<int>(scored.tokens.size());
    scores[p].relevance = scored.question_logprob;
    scores[p].words = split_words(pieces[p]);
    scores[p].surprisal = std::move(scored.surprisal);
  }
  const CompressionPlan plan = plan_compression(scores, request.ratio, !question.empty());
  report.kept_passages = 0;
  for (size_t p = 0; p < originals.size(); ++p) {
    if (!plan.keep_passage[p]) {
      kept[p].clear();
      continue;
    }
    ++report.kept_passages;
    const std::vector<bool>& words = plan.keep_word[p];
    if (std::find(words.begin(), words.end(), false) == words.end()) continue;  // verbatim
    const bool leading_space =
        !originals[p].empty() && std::isspace(static_cast<unsigned char>(originals[p][0]));
    kept[p] = kept_text(pieces[p], scores[p].words, words, leading_space);
  }
  report.applied = true;
  report.kept_context_tokens = plan.kept_tokens;
  return write_back();
}

}  // namespace rapide::compress
