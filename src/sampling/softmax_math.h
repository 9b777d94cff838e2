// exp and exp-sums for the sampler's softmax over a whole vocabulary.
//
// libm's expf is a function call per element, which makes a 150k-entry softmax cost as much
// as the truncation around it. fast_exp is the Cephes expf polynomial written branch-free so
// loops over a logits row vectorize; its relative error is below 3e-7 (tests compare it
// with std::exp). Inputs below -87 (including -inf, a banned token) give exactly 0.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>

namespace rapide {

inline float fast_exp(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f;  // ln 2 split so n * kLn2Hi is exact
  constexpr float kLn2Lo = -2.12194440e-4f;
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  constexpr float kMin = -87.0f;         // keeps 2^n a normal float
  constexpr float kMax = 88.0f;
  const float clamped = x < kMin ? kMin : (x > kMax ? kMax : x);
  const float n = (clamped * kLog2e + kRound) - kRound;
  const float r = clamped - n * kLn2Hi - n * kLn2Lo;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const float scale = std::bit_cast<float>((static_cast<int32_t>(n) + 127) << 23);
  return x < kMin ? 0.0f : p * scale;
}

// sum over the row of exp(logit - max_logit), accumulated in double (a float sum over 150k
// terms would lose digits the logprobs need). -inf entries add 0.
inline double sum_exp(std::span<const float> logits, float max_logit) {
  // Independent lanes let the compiler vectorize without reassociating one long sum.
  constexpr size_t kLanes = 8;
  double lanes[kLanes] = {};
  const size_t n = logits.size();
  const size_t full = n - n % kLanes;
  for (size_t i = 0; i < full; i += kLanes) {
    for (size_t j = 0; j < kLanes; ++j) lanes[j] += fast_exp(logits[i + j] - max_logit);
  }
  for (size_t i = full; i < n; ++i) lanes[0] += fast_exp(logits[i] - max_logit);
  double total = 0.0;
  for (double lane : lanes) total += lane;
  return total;
}

// log softmax(logits)[token], for scoring text (prompt compression's self-information).
inline double token_log_probability(std::span<const float> logits, int token) {
  const float max_logit = *std::max_element(logits.begin(), logits.end());
  return logits[static_cast<size_t>(token)] - max_logit - std::log(sum_exp(logits, max_logit));
}

}  // namespace rapide
