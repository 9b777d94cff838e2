#include "sampling/logit_processors.h"

#include <algorithm>

#include "base/error.h"

namespace rapide {

void apply_logit_bias(std::span<float> logits, std::span<const TokenBias> biases,
                      std::vector<TokenLogit>& originals) {
  for (const TokenBias& b : biases) {
    float& logit = logits[static_cast<size_t>(b.token)];
    originals.push_back({b.token, logit});
    logit += b.bias;
  }
}

void apply_penalties(std::span<float> logits, std::span<const int32_t> window,
                     const PenaltyConfig& config, std::vector<int32_t>& sorted_scratch,
                     std::vector<TokenLogit>& originals) {
  sorted_scratch.assign(window.begin(), window.end());
  std::sort(sorted_scratch.begin(), sorted_scratch.end());
  const auto vocab_size = static_cast<int64_t>(logits.size());
  for (size_t i = 0; i < sorted_scratch.size();) {
    const int32_t token = sorted_scratch[i];
    size_t end = i + 1;
    while (end < sorted_scratch.size() && sorted_scratch[end] == token) ++end;
    const auto count = static_cast<float>(end - i);
    i = end;
    if (token < 0 || token >= vocab_size) {
      fail(ErrorCode::kInvalidArgument,
           "history_tokens: token id {} is outside the vocabulary [0, {})", token, vocab_size);
    }
    float& logit = logits[static_cast<size_t>(token)];
    originals.push_back({token, logit});
    logit = logit > 0.0f ? logit / config.repetition : logit * config.repetition;
    logit -= count * config.frequency + config.presence;
  }
}

float original_logit(std::span<const float> logits, std::span<const TokenLogit> originals,
                     int32_t token) {
  for (const TokenLogit& saved : originals) {
    if (saved.token == token) return saved.logit;
  }
  return logits[static_cast<size_t>(token)];
}

}  // namespace rapide
