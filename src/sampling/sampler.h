// Sampler: turns one row of logits into the next token of one sequence.
//
// One Sampler per sequence. It owns the sequence's RNG (std::mt19937_64 seeded with
// params.seed), so a sequence's tokens depend only on its own seed and its own logits, never
// on what else shares the batch (batch invariance). Scratch buffers are members: after the
// first call, sample() allocates nothing (a penalty window of the whole history can still
// grow its buffer as the history grows).
//
// The chain is llama.cpp's common sampler order:
//   logit_bias (+ bans) -> penalties -> top_k -> top_p -> min_p -> temperature -> draw
// Temperature 0 is greedy: argmax after bias and penalties, ties to the lowest token id.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "sampling/logit_processors.h"
#include "sampling/sampling_params.h"
#include "sampling/truncation.h"

namespace rapide {

struct TokenLogprob {
  int32_t token;
  float logprob;
};

struct SampleResult {
  int32_t token = -1;
  // log p(token) under the final distribution it was drawn from (after every processor and
  // temperature); 0 for greedy, which draws from a point mass.
  float logprob = 0.0f;
  // log softmax(raw logits)[token]: the model's own logprob, what OpenAI's `logprobs` reports.
  // NaN unless params.wants_logprobs().
  float raw_logprob = 0.0f;
  // The params.num_alternatives() most likely tokens under the raw distribution, best first
  // (ties to the lower id). Points into the Sampler: valid until its next sample().
  std::span<const TokenLogprob> top_logprobs;
  // verify() only: whether the token is the proposed one.
  bool draft_accepted = false;
};

class Sampler {
 public:
  // Validates params (Error(kInvalidArgument) naming the parameter). end_of_generation_ids
  // are the tokens Tokenizer::is_end_of_generation accepts: banned while fewer than
  // min_tokens tokens have been sampled, and always when ignore_eos.
  Sampler(const SamplingParams& params, int vocab_size,
          std::span<const int32_t> end_of_generation_ids = {});

  // Samples one token. `logits` (vocab_size entries) is used as scratch and left processed
  // (bias and penalties applied). history_tokens is prompt + generated so far; penalties
  // look at its last penalty_last_n tokens.
  SampleResult sample(std::span<float> logits, std::span<const int32_t> history_tokens);
  // Speculative decoding: decides whether the target accepts a proposed token (`draft`) at
  // this position, and returns the token to emit. Greedy: the argmax, accepted when equal.
  // Sampling, with p the distribution sample() would draw from and q the proposer's
  // (Leviathan et al. 2023, Chen et al. 2023): the draft is accepted with probability
  // min(1, p(draft) / q(draft)); on rejection the token is drawn from max(0, p - q),
  // renormalized. `draft_distribution` is q as the draft's own sampler left it
  // (last_distribution(): tokens and probabilities); empty means a deterministic proposer,
  // q one-hot on the draft (accepted with p(draft), else drawn from p without it). Either
  // way the emitted tokens are distributed exactly as sample()'s.
  SampleResult verify(std::span<float> logits, std::span<const int32_t> history_tokens,
                      int32_t draft, std::span<const Candidate> draft_distribution = {});

  // A draft model's sampler proposes for the target's position: min_tokens' bans follow the
  // target's count of sampled tokens, not the draft's own.
  void set_num_sampled(int32_t sampled) { num_sampled_ = sampled; }

  // The distribution the last token was drawn from: surviving tokens with their processed
  // logits (before temperature) and final probabilities (summing to 1). Sorted best first
  // only when top_k ran; otherwise in an unspecified order. Valid until the next sample().
  std::span<const Candidate> last_distribution() const {
    return {candidates_.data(), num_candidates_};
  }

  // Tokens sampled so far (drives min_tokens).
  int32_t num_sampled() const { return num_sampled_; }
  const SamplingParams& params() const { return params_; }

 private:
  // The raw log-softmax normalizer and the top alternatives, before any processor runs.
  double raw_log_normalizer(std::span<const float> logits);
  void apply_processors(std::span<float> logits, std::span<const int32_t> history_tokens);
  // Truncation, temperature and the draw; returns the token and sets *logprob.
  // With draft >= 0: the rejection rule of verify() instead of a plain draw.
  int32_t draw(std::span<const float> logits, float* logprob, int32_t draft = -1,
               std::span<const Candidate> q = {});
  // verify()'s rule for the `n` candidates weighted by candidates_[i].prob (summing to
  // `total`): the index of the token to emit.
  size_t accept_or_resample(size_t n, double total, int32_t draft, std::span<const Candidate> q);
  // One draw over candidates_[0, n) with weights weight(i) (summing to `total` > 0).
  template <typename Weight>
  size_t draw_index(size_t n, double total, Weight weight);
  SampleResult sample_or_verify(std::span<float> logits, std::span<const int32_t> history_tokens,
                                int32_t draft, std::span<const Candidate> q);

  SamplingParams params_;
  int vocab_size_;
  PenaltyConfig penalties_;
  std::vector<TokenBias> always_bias_;      // logit_bias, plus end-of-generation bans
  std::vector<TokenBias> min_tokens_bans_;  // end-of-generation + stop_token_ids
  std::mt19937_64 rng_;
  int32_t num_sampled_ = 0;

  std::vector<TokenLogit> originals_;
  std::vector<int32_t> penalty_scratch_;
  std::vector<Candidate> alternatives_heap_;
  std::vector<TokenLogprob> alternatives_;
  std::vector<Candidate> candidates_;
  size_t num_candidates_ = 0;
  std::vector<float> q_dense_;  // verify(): q by token id, zero outside the draft's support
};

}  // namespace rapide
