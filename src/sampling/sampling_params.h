// What a request asks of the sampler: the knobs of OpenAI's and llama.cpp's APIs, as plain data.
//
// Every field's default leaves that feature off, so a default SamplingParams samples from the
// model's distribution at temperature 1. Front ends fill this from JSON / flags and call
// validate() once, so errors name the request parameter the user wrote.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "grammar/constraint.h"

namespace rapide {

// One entry of logit_bias: added to the token's logit before anything else runs.
// A bias of -infinity bans the token (llama.cpp's `"logit_bias": [[id, false]]`).
struct TokenBias {
  int32_t token = 0;
  float bias = 0.0f;
};

struct SamplingParams {
  // The most alternatives OpenAI lets a request ask for per token.
  static constexpr int32_t kMaxTopLogprobs = 20;

  // Distribution shaping, applied in llama.cpp's common sampler order:
  // logit_bias -> penalties -> top_k -> top_p -> min_p -> temperature -> draw.
  float temperature = 1.0f;  // 0 (< kGreedyBelow) = greedy: argmax, ties -> lowest id; <= 100
  int32_t top_k = 0;         // keep the k most likely tokens; 0 = off
  float top_p = 1.0f;        // keep the smallest set with cumulative probability >= top_p; 1 = off,
                             // 0 = the most likely token alone (as OpenAI reads 0)
  float min_p = 0.0f;        // drop tokens with p < min_p * p(most likely); 0 = off

  // Penalties on tokens of the recent history (prompt + generated so far).
  // repetition_penalty is CTRL / llama.cpp style: positive logits are divided by it,
  // negative ones multiplied. presence/frequency are OpenAI style: subtract
  // presence_penalty once for a token that occurred, frequency_penalty per occurrence.
  float repetition_penalty = 1.0f;  // 1 = off; in [kMinRepetitionPenalty, kMaxRepetitionPenalty]
  static constexpr float kMinRepetitionPenalty = 0.01f;
  static constexpr float kMaxRepetitionPenalty = 100.0f;
  float presence_penalty = 0.0f;   // [-2, 2]; 0 = off
  float frequency_penalty = 0.0f;  // [-2, 2]; 0 = off
  int32_t penalty_last_n = 64;     // window of history tokens penalized; 0 = none, -1 = all

  // Duplicated tokens add their biases up.
  std::vector<TokenBias> logit_bias;

  // The sampler's RNG seed: the same seed, params and logits give the same tokens.
  // Front ends choose a random seed when the request does not give one.
  uint64_t seed = 0;

  // Length and stop conditions.
  int32_t max_tokens = std::numeric_limits<int32_t>::max();  // also bounded by the context
  int32_t min_tokens = 0;   // the first min_tokens tokens cannot be end-of-generation or stops
  bool ignore_eos = false;  // ban end-of-generation tokens (llama.cpp semantics)
  std::vector<int32_t> stop_token_ids;  // sampling one of these finishes with kStop
  std::vector<std::string> stop;        // stop strings; the match itself is not emitted
  // Every generated token is checked against every stop: without bounds one request could
  // slow the whole engine (250k stop strings took other clients from 0.14 s to 53 s).
  static constexpr size_t kMaxStopStrings = 64;
  static constexpr size_t kMaxStopBytes = 1024;  // per stop string
  static constexpr size_t kMaxStopTokenIds = 1024;

  // Log-probabilities, all under the model's raw distribution (softmax of the logits before
  // any processing), as OpenAI and vLLM report them.
  bool logprobs = false;     // report the sampled token's raw logprob
  int32_t top_logprobs = 0;  // OpenAI: alternatives per token, [0, 20]
  int32_t n_probs = 0;       // llama.cpp /completion: alternatives per token, [0, vocab size]

  // Structured output: only tokens the grammar allows are sampled, and the request stops
  // with kStop once the output is complete and nothing may follow (grammar/constraint.h).
  // Null: free generation. Shared by every request with the same grammar (its mask cache).
  std::shared_ptr<const grammar::Constraint> constraint;

  // How many alternatives the sampler reports: the larger of top_logprobs and n_probs.
  int32_t num_alternatives() const { return top_logprobs > n_probs ? top_logprobs : n_probs; }
  bool wants_logprobs() const { return logprobs || num_alternatives() > 0; }
  // Temperatures this small are greedy (as in vLLM): dividing by them would overflow.
  static constexpr float kGreedyBelow = 1e-5f;
  bool is_greedy() const { return temperature < kGreedyBelow; }

  // Throws Error(kInvalidArgument) naming the offending parameter (e.g. "top_p must be in
  // (0, 1], got 1.5") when a value is out of range for a vocabulary of vocab_size tokens.
  void validate(int vocab_size) const;
};

}  // namespace rapide
