#include "sampling/sampling_params.h"

#include <cmath>

#include "base/error.h"

namespace rapide {
namespace {

// Comparisons with NaN are false, so NaN is never in range.
bool in_closed(float x, float lo, float hi) {
  return lo <= x && x <= hi;
}

void check_token(int32_t token, int vocab_size, const char* what) {
  if (token < 0 || token >= vocab_size) {
    fail(ErrorCode::kInvalidArgument, "{}: token id {} is outside the vocabulary [0, {})", what,
         token, vocab_size);
  }
}

}  // namespace

void SamplingParams::validate(int vocab_size) const {
  if (vocab_size <= 0) {
    fail(ErrorCode::kInvalidArgument, "vocab_size must be positive, got {}", vocab_size);
  }
  if (!in_closed(temperature, 0.0f, 100.0f)) {
    fail(ErrorCode::kInvalidArgument, "temperature must be in [0, 100], got {}", temperature);
  }
  if (top_k < 0) fail(ErrorCode::kInvalidArgument, "top_k must be >= 0, got {}", top_k);
  if (!in_closed(top_p, 0.0f, 1.0f)) {
    fail(ErrorCode::kInvalidArgument, "top_p must be in [0, 1], got {}", top_p);
  }
  if (!in_closed(min_p, 0.0f, 1.0f)) {
    fail(ErrorCode::kInvalidArgument, "min_p must be in [0, 1], got {}", min_p);
  }
  // Logits are divided or multiplied by the penalty: beyond these bounds ordinary logits
  // overflow to inf (1e-45) or collapse to -inf, and the sampler would fail mid-request.
  if (!in_closed(repetition_penalty, kMinRepetitionPenalty, kMaxRepetitionPenalty)) {
    fail(ErrorCode::kInvalidArgument, "repetition_penalty must be in [{}, {}], got {}",
         kMinRepetitionPenalty, kMaxRepetitionPenalty, repetition_penalty);
  }
  if (!in_closed(presence_penalty, -2.0f, 2.0f)) {
    fail(ErrorCode::kInvalidArgument, "presence_penalty must be in [-2, 2], got {}",
         presence_penalty);
  }
  if (!in_closed(frequency_penalty, -2.0f, 2.0f)) {
    fail(ErrorCode::kInvalidArgument, "frequency_penalty must be in [-2, 2], got {}",
         frequency_penalty);
  }
  if (penalty_last_n < -1) {
    fail(ErrorCode::kInvalidArgument, "penalty_last_n must be >= -1, got {}", penalty_last_n);
  }
  for (const TokenBias& entry : logit_bias) {
    check_token(entry.token, vocab_size, "logit_bias");
    // -inf is an explicit ban; NaN or +inf would poison the softmax.
    if (std::isnan(entry.bias) || entry.bias == std::numeric_limits<float>::infinity()) {
      fail(ErrorCode::kInvalidArgument,
           "logit_bias: bias for token {} must be finite or -inf, got {}", entry.token, entry.bias);
    }
  }
  if (max_tokens < 1) {
    fail(ErrorCode::kInvalidArgument, "max_tokens must be >= 1, got {}", max_tokens);
  }
  if (min_tokens < 0 || min_tokens > max_tokens) {
    fail(ErrorCode::kInvalidArgument, "min_tokens must be in [0, max_tokens={}], got {}",
         max_tokens, min_tokens);
  }
  if (stop_token_ids.size() > kMaxStopTokenIds) {
    fail(ErrorCode::kInvalidArgument, "stop_token_ids must hold at most {} token ids, got {}",
         kMaxStopTokenIds, stop_token_ids.size());
  }
  for (int32_t token : stop_token_ids) check_token(token, vocab_size, "stop_token_ids");
  // The sampler bans stop tokens until min_tokens are out: banning all of them would leave
  // nothing to sample, a failure of the request that is known before it runs.
  if (min_tokens > 0 && stop_token_ids.size() >= static_cast<size_t>(vocab_size)) {
    std::vector<bool> stops(static_cast<size_t>(vocab_size), false);
    size_t distinct = 0;
    for (int32_t token : stop_token_ids) {
      if (!stops[static_cast<size_t>(token)]) {
        stops[static_cast<size_t>(token)] = true;
        ++distinct;
      }
    }
    if (distinct == static_cast<size_t>(vocab_size)) {
      fail(ErrorCode::kInvalidArgument,
           "min_tokens: stop_token_ids name every token of the vocabulary, so no token could "
           "be generated before min_tokens={}",
           min_tokens);
    }
  }
  if (stop.size() > kMaxStopStrings) {
    fail(ErrorCode::kInvalidArgument, "stop must hold at most {} strings, got {}", kMaxStopStrings,
         stop.size());
  }
  for (size_t i = 0; i < stop.size(); ++i) {
    // An empty stop string would match before any text and end every request at once.
    if (stop[i].empty()) fail(ErrorCode::kInvalidArgument, "stop[{}] must not be empty", i);
    if (stop[i].size() > kMaxStopBytes) {
      fail(ErrorCode::kInvalidArgument, "stop[{}] must be at most {} bytes, got {}", i,
           kMaxStopBytes, stop[i].size());
    }
  }
  if (top_logprobs < 0 || top_logprobs > kMaxTopLogprobs) {
    fail(ErrorCode::kInvalidArgument, "top_logprobs must be in [0, {}], got {}", kMaxTopLogprobs,
         top_logprobs);
  }
  if (n_probs < 0 || n_probs > vocab_size) {
    fail(ErrorCode::kInvalidArgument, "n_probs must be in [0, vocab size {}], got {}", vocab_size,
         n_probs);
  }
}

}  // namespace rapide
