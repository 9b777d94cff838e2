#include "sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/error.h"
#include "sampling/softmax_math.h"

namespace rapide {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// A uniform double in [0, 1) from the top 53 bits. std::uniform_real_distribution is
// implementation-defined, so it would make seeded outputs differ between standard libraries.
double uniform01(std::mt19937_64& rng) {
  return static_cast<double>(rng() >> 11) * 0x1.0p-53;
}

}  // namespace

Sampler::Sampler(const SamplingParams& params, int vocab_size,
                 std::span<const int32_t> end_of_generation_ids)
    : params_(params),
      vocab_size_(vocab_size),
      penalties_{params.repetition_penalty, params.presence_penalty, params.frequency_penalty},
      rng_(params.seed) {
  params_.validate(vocab_size);
  always_bias_ = params_.logit_bias;
  for (int32_t token : end_of_generation_ids) {
    if (token < 0 || token >= vocab_size) {
      fail(ErrorCode::kInvalidArgument,
           "end_of_generation_ids: token id {} is outside the vocabulary [0, {})", token,
           vocab_size);
    }
    if (params_.ignore_eos) always_bias_.push_back({token, -kInf});
    min_tokens_bans_.push_back({token, -kInf});
  }
  for (int32_t token : params_.stop_token_ids) min_tokens_bans_.push_back({token, -kInf});
  if (params_.penalty_last_n > 0) {
    penalty_scratch_.reserve(static_cast<size_t>(params_.penalty_last_n));
  }
  const auto alternatives = static_cast<size_t>(params_.num_alternatives());
  alternatives_heap_.reserve(alternatives);
  alternatives_.reserve(alternatives);
  // Greedy keeps one candidate; other modes grow the buffer on the first call to what the
  // configured truncation needs (top_k entries, or the whole vocabulary).
  candidates_.resize(1);
}

SampleResult Sampler::sample(std::span<float> logits, std::span<const int32_t> history_tokens) {
  return sample_or_verify(logits, history_tokens, -1, {});
}

SampleResult Sampler::verify(std::span<float> logits, std::span<const int32_t> history_tokens,
                             int32_t draft, std::span<const Candidate> draft_distribution) {
  if (draft < 0 || draft >= vocab_size_) {
    fail(ErrorCode::kInvalidArgument, "draft token {} is outside the vocabulary", draft);
  }
  for (const Candidate& c : draft_distribution) {
    if (c.token < 0 || c.token >= vocab_size_) {
      fail(ErrorCode::kInvalidArgument, "draft distribution: token {} is outside the vocabulary",
           c.token);
    }
  }
  return sample_or_verify(logits, history_tokens, draft, draft_distribution);
}

SampleResult Sampler::sample_or_verify(std::span<float> logits,
                                       std::span<const int32_t> history_tokens, int32_t draft,
                                       std::span<const Candidate> q) {
  if (logits.size() != static_cast<size_t>(vocab_size_)) {
    fail(ErrorCode::kInvalidArgument, "logits: {} entries for a vocabulary of {}", logits.size(),
         vocab_size_);
  }
  SampleResult result;
  double log_normalizer = 0.0;
  if (params_.wants_logprobs()) log_normalizer = raw_log_normalizer(logits);
  apply_processors(logits, history_tokens);

  if (params_.is_greedy()) {
    const LogitStats stats = scan_logits(logits);
    if (stats.max_token < 0) {
      fail(ErrorCode::kInvalidArgument,
           "no token left to sample: logit_bias / ignore_eos / min_tokens ban every token");
    }
    result.token = static_cast<int32_t>(stats.max_token);
    result.logprob = 0.0f;
    candidates_[0] = {result.token, stats.max_logit, 1.0f};
    num_candidates_ = 1;
  } else {
    result.token = draw(logits, &result.logprob, draft, q);
  }
  result.draft_accepted = draft >= 0 && result.token == draft;

  if (params_.wants_logprobs()) {
    const double raw = original_logit(logits, originals_, result.token);
    result.raw_logprob = static_cast<float>(raw - log_normalizer);
    result.top_logprobs = alternatives_;
  } else {
    result.raw_logprob = std::numeric_limits<float>::quiet_NaN();
  }
  ++num_sampled_;
  return result;
}

double Sampler::raw_log_normalizer(std::span<const float> logits) {
  const LogitStats stats = scan_logits(logits);
  alternatives_.clear();
  if (stats.num_finite == 0) return 0.0;  // apply_processors/draw report the failure
  const double log_normalizer = stats.max_logit + std::log(sum_exp(logits, stats.max_logit));

  const int64_t k = std::min<int64_t>(params_.num_alternatives(), stats.num_finite);
  if (k > 0) {
    select_top_k(logits, k, alternatives_heap_);
    for (int64_t i = 0; i < k; ++i) {
      const Candidate& c = alternatives_heap_[static_cast<size_t>(i)];
      alternatives_.push_back({c.token, static_cast<float>(c.logit - log_normalizer)});
    }
  }
  return log_normalizer;
}

void Sampler::apply_processors(std::span<float> logits, std::span<const int32_t> history_tokens) {
  originals_.clear();
  apply_logit_bias(logits, always_bias_, originals_);
  if (num_sampled_ < params_.min_tokens) apply_logit_bias(logits, min_tokens_bans_, originals_);
  if (penalties_.active() && params_.penalty_last_n != 0) {
    size_t window = history_tokens.size();
    if (params_.penalty_last_n > 0) {
      window = std::min(window, static_cast<size_t>(params_.penalty_last_n));
    }
    apply_penalties(logits, history_tokens.last(window), penalties_, penalty_scratch_, originals_);
  }
}

int32_t Sampler::draw(std::span<const float> logits, float* logprob, int32_t draft,
                      std::span<const Candidate> q) {
  const LogitStats stats = scan_logits(logits);
  if (stats.num_finite == 0) {
    fail(ErrorCode::kInvalidArgument,
         "no token left to sample: logit_bias / ignore_eos / min_tokens ban every token");
  }
  const float max_logit = stats.max_logit;

  // Top-k, or collect everything min-p would keep. Pre-filtering by min-p is exact: min-p
  // keeps a best-ranked set relative to the best token, which top-k and top-p never drop,
  // and top-p still normalizes over everything before min-p.
  size_t n = 0;
  // top_p 0 (OpenAI accepts it) keeps the most likely token alone: top-k 1.
  const int32_t k = params_.top_p > 0.0f ? params_.top_k : 1;
  const bool top_k = k > 0 && k < stats.num_finite;
  if (top_k) {
    select_top_k(logits, k, candidates_);
    n = static_cast<size_t>(k);
  } else {
    n = collect_candidates(logits, min_p_threshold(max_logit, params_.min_p), candidates_);
  }
  const std::span<Candidate> all(candidates_.data(), n);
  if (params_.top_p > 0.0f && params_.top_p < 1.0f) {
    double total_weight = 0.0;
    if (top_k) {
      for (const Candidate& c : all) total_weight += fast_exp(c.logit - max_logit);
    } else {
      total_weight = sum_exp(logits, max_logit);
    }
    n = truncate_top_p(all, top_k, max_logit, total_weight, params_.top_p);
  }
  if (params_.min_p > 0.0f) {
    n = truncate_min_p(all.first(n), max_logit, params_.min_p);
  }
  num_candidates_ = n;

  // Temperature, then one uniform draw over the survivors. Exactly one RNG value per plain
  // draw keeps a sequence's stream position equal to its token count (a verification takes
  // one or two, so speculative sampling is exact in distribution, not in the stream).
  const float inv_temperature = 1.0f / params_.temperature;
  double total = 0.0;
  for (size_t i = 0; i < n; ++i) {
    // The total sums the stored (float) weights in the order the walk below does, so the
    // walk's final running sum equals it and a token of weight 0 can never be chosen.
    candidates_[i].prob = fast_exp((candidates_[i].logit - max_logit) * inv_temperature);
    total += candidates_[i].prob;
  }
  const size_t chosen = draft >= 0
                            ? accept_or_resample(n, total, draft, q)
                            : draw_index(n, total, [&](size_t i) { return candidates_[i].prob; });
  const double inv_total = 1.0 / total;
  for (size_t i = 0; i < n; ++i) {
    candidates_[i].prob = static_cast<float>(candidates_[i].prob * inv_total);
  }
  const Candidate& picked = candidates_[chosen];
  *logprob = static_cast<float>((picked.logit - max_logit) * inv_temperature - std::log(total));
  return picked.token;
}

template <typename Weight>
size_t Sampler::draw_index(size_t n, double total, Weight weight) {
  const double target = uniform01(rng_) * total;
  double cumulative = 0.0;
  size_t last = n;
  for (size_t i = 0; i < n; ++i) {
    const double w = weight(i);
    if (w <= 0.0) continue;  // never the fallback below either
    last = i;
    cumulative += w;
    if (target < cumulative) break;
  }
  return last;
}

size_t Sampler::accept_or_resample(size_t n, double total, int32_t draft,
                                   std::span<const Candidate> q) {
  // q by token id for the residual below; a deterministic proposer's q is one-hot.
  if (q_dense_.empty()) q_dense_.assign(static_cast<size_t>(vocab_size_), 0.0f);
  if (q.empty()) {
    q_dense_[static_cast<size_t>(draft)] = 1.0f;
  } else {
    for (const Candidate& c : q) q_dense_[static_cast<size_t>(c.token)] = c.prob;
  }
  size_t at = n;
  for (size_t i = 0; i < n; ++i) {
    if (candidates_[i].token == draft) at = i;
  }
  // p(i) = candidates_[i].prob / total. Accept with min(1, p / q), i.e. when u * q < p; a
  // draft p rules out is rejected without spending a random number.
  const double p_draft = at < n ? candidates_[at].prob / total : 0.0;
  const double q_draft = q_dense_[static_cast<size_t>(draft)];
  size_t chosen = at;
  if (p_draft <= 0.0 || (q_draft > 0.0 && uniform01(rng_) * q_draft >= p_draft)) {
    // Rejected: draw from max(0, p - q), in the candidates' weight units (p * total).
    const auto residual = [&](size_t i) {
      const double qi = q_dense_[static_cast<size_t>(candidates_[i].token)];
      return std::max(0.0, static_cast<double>(candidates_[i].prob) - qi * total);
    };
    double residual_total = 0.0;
    for (size_t i = 0; i < n; ++i) residual_total += residual(i);
    // p <= q everywhere only up to rounding (a rejection then has probability ~0): draw
    // from p rather than from nothing.
    chosen = residual_total > 0.0
                 ? draw_index(n, residual_total, residual)
                 : draw_index(n, total, [&](size_t i) { return candidates_[i].prob; });
  }
  if (q.empty()) {
    q_dense_[static_cast<size_t>(draft)] = 0.0f;
  } else {
    for (const Candidate& c : q) q_dense_[static_cast<size_t>(c.token)] = 0.0f;
  }
  return chosen;
}

}  // namespace rapide
