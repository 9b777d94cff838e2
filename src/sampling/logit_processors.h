// The processors that edit the full logits row in place, before truncation: logit bias and
// repetition / presence / frequency penalties.
//
// Each records the original value of every logit it changes in `originals` (first record of
// a token = its raw value), so the sampler can still report the model's own logprob of the
// token it picks without copying the whole row.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sampling/sampling_params.h"

namespace rapide {

struct TokenLogit {
  int32_t token;
  float logit;
};

// logits[b.token] += b.bias for every entry (a -inf bias bans the token). Token ids must have
// been validated against the vocabulary (SamplingParams::validate).
void apply_logit_bias(std::span<float> logits, std::span<const TokenBias> biases,
                      std::vector<TokenLogit>& originals);

struct PenaltyConfig {
  float repetition = 1.0f;
  float presence = 0.0f;
  float frequency = 0.0f;

  bool active() const { return repetition != 1.0f || presence != 0.0f || frequency != 0.0f; }
};

// For every distinct token t of `window` occurring c times (llama.cpp's penalties sampler):
//   logit = logit > 0 ? logit / repetition : logit * repetition
//   logit -= c * frequency + presence
// `sorted_scratch` holds a sorted copy of the window (counting by sorting keeps memory
// proportional to the window instead of the vocabulary). Throws Error(kInvalidArgument) when
// a window token is outside the vocabulary.
void apply_penalties(std::span<float> logits, std::span<const int32_t> window,
                     const PenaltyConfig& config, std::vector<int32_t>& sorted_scratch,
                     std::vector<TokenLogit>& originals);

// The model's value of logits[token] before any processor above changed it.
float original_logit(std::span<const float> logits, std::span<const TokenLogit> originals,
                     int32_t token);

}  // namespace rapide
