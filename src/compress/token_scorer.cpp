#include "compress/token_scorer.h"

#include <algorithm>
#include <cmath>

#include "base/clock.h"

namespace rapide::compress {

namespace {

constexpr int kChunk = 256;           // tokens per forward pass
constexpr int kCalibrationTokens = 64;

// log softmax(logits)[token], stable (max subtracted, sum in double).
float log_probability(const float* logits, int vocab, int token) {
  const float max_logit = *std::max_element(logits, logits + vocab);
  double sum = 0.0;
  for (int i = 0; i < vocab; ++i) sum += std::exp(static_cast<double>(logits[i] - max_logit));
  return static_cast<float>(logits[token] - max_logit - std::log(sum));
}

}  // namespace

TokenScorer::TokenScorer(std::shared_ptr<const ModelFile> file, int threads)
    : file_(std::move(file)),
      model_(file_),
      tokenizer_(Tokenizer::create(file_->tokenizer)),
      pool_(std::max(1, threads)) {
  // The first cost figure, before any request: a pass the length of a short passage.
  const int32_t filler = std::max<int32_t>(0, tokenizer_->bos_id());
  token_logprobs(std::vector<int32_t>(kCalibrationTokens, filler));
}

std::vector<float> TokenScorer::token_logprobs(const std::vector<int32_t>& ids) {
  const int n = static_cast<int>(ids.size());
  if (!kv_ || kv_->max_context() < n) {
    kv_ = std::make_unique<ContiguousKvStore>(model_.config(), 1, std::max(n, kChunk));
  }
  const TimePoint start = Clock::now();
  const int vocab = model_.config().vocab_size;
  std::vector<float> out(static_cast<size_t>(std::max(0, n - 1)));
  Batch batch;
  for (int begin = 0; begin < n; begin += kChunk) {
    const int end = std::min(n, begin + kChunk);
    batch.clear();
    for (int p = begin; p < end; ++p) batch.add(ids[p], 0, p, p + 1 < n);
    const std::span<const float> logits = model_.forward(batch, *kv_, pool_);
    for (int p = begin; p < end && p + 1 < n; ++p) {
      out[p] = log_probability(logits.data() + static_cast<size_t>(p - begin) * vocab, vocab,
                               ids[p + 1]);
    }
  }
  seconds_ += seconds_between(start, Clock::now());
  tokens_ += n;
  return out;
}

ScoredPassage TokenScorer::score(std::string_view passage, std::string_view question) {
  ScoredPassage scored;
  std::vector<int32_t> ids = tokenizer_->encode(passage, /*add_bos=*/false);
  scored.tokens = ids;
  // BOS (or, for a vocabulary without one, nothing) conditions the first passage token.
  const bool bos = tokenizer_->bos_id() >= 0;
  if (bos) ids.insert(ids.begin(), tokenizer_->bos_id());
  size_t question_begin = ids.size();
  if (!question.empty()) {
    // The question follows the passage as in a prompt, after a blank line (not scored).
    const std::vector<int32_t> gap = tokenizer_->encode("\n\n", /*add_bos=*/false);
    ids.insert(ids.end(), gap.begin(), gap.end());
    question_begin = ids.size();
    const std::vector<int32_t> q = tokenizer_->encode(question, /*add_bos=*/false);
    ids.insert(ids.end(), q.begin(), q.end());
    scored.question_tokens = static_cast<int>(q.size());
  }
  const std::vector<float> logprobs = ids.size() > 1 ? token_logprobs(ids) : std::vector<float>();
  // logprobs[p] predicts ids[p + 1]. Without BOS the first token has no prediction: it is
  // given the mean of the others below (as informative as a typical token).
  const size_t offset = bos ? 0 : 1;
  scored.surprisal.resize(scored.tokens.size());
  double total = 0.0;
  for (size_t i = offset; i < scored.tokens.size(); ++i) {
    scored.surprisal[i] = -logprobs[i - offset];
    total += scored.surprisal[i];
  }
  if (!bos && !scored.tokens.empty()) {
    const size_t rest = scored.tokens.size() - 1;
    scored.surprisal[0] = rest > 0 ? static_cast<float>(total / rest) : 0.0f;
  }
  for (size_t p = question_begin == 0 ? 0 : question_begin - 1; p + 1 < ids.size(); ++p) {
    scored.question_logprob += logprobs[p];
  }
  return scored;
}

}  // namespace rapide::compress
