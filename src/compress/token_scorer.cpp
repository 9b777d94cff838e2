#include "compress/token_scorer.h"

#include <algorithm>

#include "base/clock.h"
#include "sampling/softmax_math.h"

namespace rapide::compress {

namespace {

constexpr int kChunk = 256;  // tokens per forward pass
constexpr int kCalibrationTokens = 64;
// Positions a cached passage keeps free after it for questions (a longer question
// re-runs the passage into a larger cache).
constexpr int kQuestionRoom = 128;

}  // namespace

TokenScorer::TokenScorer(std::shared_ptr<const ModelFile> file, int threads, size_t cache_bytes)
    : file_(std::move(file)),
      model_(file_),
      tokenizer_(Tokenizer::create(file_->tokenizer)),
      pool_(std::max(1, threads)),
      cache_bytes_(cache_bytes) {
  // The first cost figure, before any request: a pass the length of a short passage.
  const int32_t filler = std::max<int32_t>(0, tokenizer_->bos_id());
  ContiguousKvStore kv(model_.config(), 1, kCalibrationTokens);
  run(std::vector<int32_t>(kCalibrationTokens, filler), 0, kv);
}

std::vector<float> TokenScorer::run(const std::vector<int32_t>& ids, int from,
                                    ContiguousKvStore& kv) {
  const int n = static_cast<int>(ids.size());
  const TimePoint start = Clock::now();
  const auto vocab = static_cast<size_t>(model_.config().vocab_size);
  std::vector<float> out(static_cast<size_t>(std::max(0, n - 1 - from)));
  Batch batch;
  for (int begin = from; begin < n; begin += kChunk) {
    const int end = std::min(n, begin + kChunk);
    batch.clear();
    for (int p = begin; p < end; ++p) batch.add(ids[p], 0, p, p + 1 < n);
    const std::span<const float> logits = model_.forward(batch, kv, pool_);
    for (int p = begin; p < end && p + 1 < n; ++p) {
      const auto row = logits.subspan(static_cast<size_t>(p - begin) * vocab, vocab);
      out[p - from] = static_cast<float>(token_log_probability(row, ids[p + 1]));
    }
  }
  seconds_ += seconds_between(start, Clock::now());
  tokens_ += n - from;
  return out;
}

bool TokenScorer::cached(std::string_view passage) const {
  return cache_.contains(std::string(passage));
}

void TokenScorer::clear_cache() {
  cache_.clear();
  lru_.clear();
  used_bytes_ = 0;
}

TokenScorer::Entry& TokenScorer::passage_entry(std::string_view passage, int room) {
  const std::string key(passage);
  if (auto it = cache_.find(key); it != cache_.end()) {
    Entry& e = it->second;
    if (e.kv->max_context() >= static_cast<int>(e.ids.size()) + room) {
      lru_.splice(lru_.begin(), lru_, e.lru);
      return e;
    }
    used_bytes_ -= e.kv->memory_bytes();
    lru_.erase(e.lru);
    cache_.erase(it);
  }
  Entry e;
  e.ids = tokenizer_->encode(passage, /*add_bos=*/false);
  // BOS (or, for a vocabulary without one, nothing) conditions the first passage token.
  const bool bos = tokenizer_->bos_id() >= 0;
  if (bos) e.ids.insert(e.ids.begin(), tokenizer_->bos_id());
  const int n = static_cast<int>(e.ids.size());
  e.kv = std::make_unique<ContiguousKvStore>(model_.config(), 1,
                                             std::max(1, n + std::max(room, kQuestionRoom)));
  const std::vector<float> logprobs = run(e.ids, 0, *e.kv);
  // logprobs[p] predicts ids[p + 1]. Without BOS the first token has no prediction: it gets
  // the mean of the others (as informative as a typical token).
  const size_t offset = bos ? 0 : 1;
  const size_t tokens = e.ids.size() - (bos ? 1 : 0);
  e.surprisal.resize(tokens);
  double total = 0.0;
  for (size_t i = offset; i < tokens; ++i) {
    e.surprisal[i] = -logprobs[i - offset];
    total += e.surprisal[i];
  }
  if (!bos && tokens > 0)
    e.surprisal[0] = tokens > 1 ? static_cast<float>(total / (tokens - 1)) : 0.0f;
  // Keep it, evicting the least recently used beyond the budget (the new one always stays).
  used_bytes_ += e.kv->memory_bytes();
  lru_.push_front(key);
  e.lru = lru_.begin();
  Entry& stored = cache_[key] = std::move(e);
  while (used_bytes_ > cache_bytes_ && lru_.size() > 1) {
    auto victim = cache_.find(lru_.back());
    used_bytes_ -= victim->second.kv->memory_bytes();
    cache_.erase(victim);
    lru_.pop_back();
  }
  return stored;
}

ScoredPassage TokenScorer::score(std::string_view passage, std::string_view question) {
  std::vector<int32_t> asked;
  if (!question.empty()) {
    // The question follows the passage as in a prompt, after a blank line (not scored).
    asked = tokenizer_->encode("\n\n", /*add_bos=*/false);
  }
  const size_t gap = asked.size();
  if (!question.empty()) {
    const std::vector<int32_t> q = tokenizer_->encode(question, /*add_bos=*/false);
    asked.insert(asked.end(), q.begin(), q.end());
  }
  Entry& e = passage_entry(passage, static_cast<int>(asked.size()));
  ScoredPassage scored;
  const bool bos = tokenizer_->bos_id() >= 0;
  scored.tokens.assign(e.ids.begin() + (bos ? 1 : 0), e.ids.end());
  scored.surprisal = e.surprisal;
  scored.question_tokens = static_cast<int>(asked.size() - gap);
  if (asked.empty() || gap == 0 || e.ids.empty()) return scored;
  // The question's pass continues the passage's cache: asked[0] goes at the position after
  // the passage (the earlier positions are cached; their ids are placeholders, not run).
  const int from = static_cast<int>(e.ids.size());
  std::vector<int32_t> positioned(static_cast<size_t>(from), 0);
  positioned.insert(positioned.end(), asked.begin(), asked.end());
  const std::vector<float> logprobs = run(positioned, from, *e.kv);
  // logprobs[i] predicts asked[1 + i]; the question starts at asked[gap] (gap >= 1: a blank
  // line is at least one token).
  for (size_t i = gap - 1; i < logprobs.size(); ++i) scored.question_logprob += logprobs[i];
  return scored;
}

}  // namespace rapide::compress
