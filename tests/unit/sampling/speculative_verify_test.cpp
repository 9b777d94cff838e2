// Sampler::verify, the acceptance rule of speculative decoding, is exact: over many seeds the
// token it emits for a proposed draft is distributed as sample() draws, whatever the draft
// (likely, unlikely, or truncated away by top-k/top-p). Checked with a chi-square test at
// significance 0.001 (a correct sampler fails one configuration in a thousand runs; the
// seeds are fixed, so the outcome is deterministic). The same holds for guesses a draft
// samples from a distribution of its own (q, checked against 1 - TV(p, q) acceptance).
// Greedy verification accepts exactly the argmax.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "sampling/sampler.h"

namespace rapide {
namespace {

// Chi-square critical values at p = 0.001 for 1..9 degrees of freedom.
constexpr double kChi2Critical[] = {0,      10.828, 13.816, 16.266, 18.467,
                                    20.515, 22.458, 24.322, 26.124, 27.877};

struct Config {
  const char* name;
  SamplingParams params;
  std::vector<int32_t> history;
};

std::vector<Config> configs() {
  std::vector<Config> out;
  SamplingParams plain;
  plain.temperature = 0.8f;
  plain.top_k = 0;
  plain.top_p = 1.0f;
  plain.min_p = 0.0f;
  out.push_back({"temperature", plain, {}});
  SamplingParams truncated = plain;
  truncated.temperature = 1.2f;
  truncated.top_k = 4;
  truncated.top_p = 0.9f;
  out.push_back({"top-k + top-p", truncated, {}});
  SamplingParams penalized = plain;
  penalized.temperature = 1.0f;
  penalized.repetition_penalty = 1.5f;
  penalized.min_p = 0.02f;
  out.push_back({"penalty + min-p", penalized, {0, 0, 2}});
  return out;
}

const std::vector<float> kLogits = {2.0f, 1.6f, 1.0f, 0.4f, -0.5f, -2.5f};

// The distribution sample() draws from on `row` (non-zero entries only).
std::map<int32_t, double> distribution(const Config& c, const std::vector<float>& row) {
  Sampler s(c.params, static_cast<int>(row.size()));
  std::vector<float> logits = row;
  s.sample(logits, c.history);
  std::map<int32_t, double> p;
  for (const Candidate& cand : s.last_distribution()) {
    if (cand.prob > 0) p[cand.token] = cand.prob;
  }
  return p;
}

std::map<int32_t, double> target_distribution(const Config& c) {
  return distribution(c, kLogits);
}

// Pearson's statistic of `counts` against `trials` draws from p; every counted token must
// have p > 0.
double chi_square(const std::map<int32_t, double>& p, std::map<int32_t, int>& counts, int trials,
                  const std::string& what) {
  double chi2 = 0.0;
  for (const auto& [token, prob] : p) {
    const double expected = prob * trials;
    const double d = counts[token] - expected;
    chi2 += d * d / expected;
  }
  for (const auto& [token, n] : counts) {
    EXPECT_TRUE(p.count(token)) << what << ": token " << token << " has p = 0";
  }
  return chi2;
}

TEST(SpeculativeVerify, EmittedTokensFollowTheTargetDistributionForAnyDraft) {
  constexpr int kTrials = 20000;
  for (const Config& c : configs()) {
    const std::map<int32_t, double> p = target_distribution(c);
    ASSERT_GE(p.size(), 2u) << c.name;
    for (int32_t draft = 0; draft < static_cast<int32_t>(kLogits.size()); ++draft) {
      std::map<int32_t, int> counts;
      int accepted = 0;
      for (int t = 0; t < kTrials; ++t) {
        SamplingParams params = c.params;
        params.seed = 1000003ull * static_cast<uint64_t>(t) + static_cast<uint64_t>(draft);
        Sampler s(params, static_cast<int>(kLogits.size()));
        std::vector<float> logits = kLogits;
        const SampleResult r = s.verify(logits, c.history, draft);
        counts[r.token]++;
        accepted += r.draft_accepted;
        ASSERT_EQ(r.draft_accepted, r.token == draft);
      }
      const double chi2 = chi_square(p, counts, kTrials, c.name);
      const size_t dof = std::min<size_t>(p.size() - 1, 9);
      EXPECT_LT(chi2, kChi2Critical[dof]) << c.name << ", draft " << draft;
      // Acceptance is p(draft): within 4.5 standard deviations.
      const double pd = p.count(draft) ? p.at(draft) : 0.0;
      const double sd = std::sqrt(pd * (1 - pd) / kTrials) + 1e-9;
      EXPECT_NEAR(static_cast<double>(accepted) / kTrials, pd, 4.5 * sd + 1e-12)
          << c.name << ", draft " << draft;
    }
  }
}

// A draft model's logits: another argmax and another shape, so under top-k / top-p the
// draft's support differs from the target's (it proposes tokens p rules out, and misses
// some p keeps).
const std::vector<float> kDraftLogits = {0.9f, 2.2f, 0.3f, 1.1f, -0.2f, -1.0f};

// Sampled drafts (Leviathan et al.): the draft draws x from its own q, the target accepts it
// with min(1, p(x) / q(x)) and otherwise draws from max(0, p - q). The emitted token must
// follow p (chi-square at significance 0.001), and acceptance must be sum_x min(p, q) =
// 1 - TV(p, q) (within 4.5 standard deviations), the figure the pair A bench relies on.
TEST(SpeculativeVerify, SampledDraftsFromAnotherDistributionStillEmitTheTargets) {
  constexpr int kTrials = 20000;
  for (const Config& c : configs()) {
    const std::map<int32_t, double> p = target_distribution(c);
    const std::map<int32_t, double> q = distribution(c, kDraftLogits);
    double overlap = 0.0, total_variation = 0.0;
    for (int32_t t = 0; t < static_cast<int32_t>(kLogits.size()); ++t) {
      const double pt = p.count(t) ? p.at(t) : 0.0, qt = q.count(t) ? q.at(t) : 0.0;
      overlap += std::min(pt, qt);
      total_variation += 0.5 * std::abs(pt - qt);
    }
    ASSERT_GT(total_variation, 0.2) << c.name << ": the draft must really differ";
    std::map<int32_t, int> counts;
    int accepted = 0;
    for (int t = 0; t < kTrials; ++t) {
      SamplingParams target_params = c.params, draft_params = c.params;
      target_params.seed = 7919ull * static_cast<uint64_t>(t) + 1;
      draft_params.seed = 104729ull * static_cast<uint64_t>(t) + 2;
      Sampler draft(draft_params, static_cast<int>(kDraftLogits.size()));
      std::vector<float> draft_logits = kDraftLogits;
      const int32_t guess = draft.sample(draft_logits, c.history).token;
      const std::vector<Candidate> guess_q(draft.last_distribution().begin(),
                                           draft.last_distribution().end());
      Sampler target(target_params, static_cast<int>(kLogits.size()));
      std::vector<float> logits = kLogits;
      const SampleResult r = target.verify(logits, c.history, guess, guess_q);
      counts[r.token]++;
      accepted += r.draft_accepted;
    }
    const double chi2 = chi_square(p, counts, kTrials, c.name);
    EXPECT_LT(chi2, kChi2Critical[std::min<size_t>(p.size() - 1, 9)]) << c.name;
    const double sd = std::sqrt(overlap * (1 - overlap) / kTrials);
    EXPECT_NEAR(static_cast<double>(accepted) / kTrials, overlap, 4.5 * sd) << c.name;
    EXPECT_NEAR(overlap, 1.0 - total_variation, 1e-6);
  }
}

// The same draft distribution as the target's is always accepted: speculation with a perfect
// sampled draft loses nothing to rejections.
TEST(SpeculativeVerify, ASampledDraftEqualToTheTargetIsAlwaysAccepted) {
  for (const Config& c : configs()) {
    for (int t = 0; t < 2000; ++t) {
      SamplingParams params = c.params;
      params.seed = static_cast<uint64_t>(t);
      Sampler draft(params, static_cast<int>(kLogits.size()));
      std::vector<float> draft_logits = kLogits;
      const int32_t guess = draft.sample(draft_logits, c.history).token;
      const std::vector<Candidate> q(draft.last_distribution().begin(),
                                     draft.last_distribution().end());
      params.seed += 1000000;
      Sampler target(params, static_cast<int>(kLogits.size()));
      std::vector<float> logits = kLogits;
      ASSERT_TRUE(target.verify(logits, c.history, guess, q).draft_accepted) << c.name;
    }
  }
}

TEST(SpeculativeVerify, GreedyAcceptsExactlyTheArgmax) {
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  for (int32_t draft = 0; draft < static_cast<int32_t>(kLogits.size()); ++draft) {
    Sampler s(greedy, static_cast<int>(kLogits.size()));
    std::vector<float> logits = kLogits;
    const SampleResult r = s.verify(logits, {}, draft);
    EXPECT_EQ(r.token, 0);
    EXPECT_EQ(r.draft_accepted, draft == 0);
  }
}

}  // namespace
}  // namespace rapide
