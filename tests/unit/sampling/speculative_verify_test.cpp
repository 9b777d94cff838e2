// Sampler::verify, the acceptance rule of speculative decoding, is exact: over many seeds the
// token it emits for a proposed draft is distributed as sample() draws, whatever the draft
// (likely, unlikely, or truncated away by top-k/top-p). Checked with a chi-square test at
// significance 0.001 (a correct sampler fails one configuration in a thousand runs; the
// seeds are fixed, so the outcome is deterministic). Greedy verification accepts exactly
// the argmax.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
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

// The distribution sample() draws from (non-zero entries only).
std::map<int32_t, double> target_distribution(const Config& c) {
  Sampler s(c.params, static_cast<int>(kLogits.size()));
  std::vector<float> logits = kLogits;
  s.sample(logits, c.history);
  std::map<int32_t, double> p;
  for (const Candidate& cand : s.last_distribution()) {
    if (cand.prob > 0) p[cand.token] = cand.prob;
  }
  return p;
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
      double chi2 = 0.0;
      for (const auto& [token, prob] : p) {
        const double expected = prob * kTrials;
        const double d = counts[token] - expected;
        chi2 += d * d / expected;
      }
      for (const auto& [token, n] : counts) {
        EXPECT_TRUE(p.count(token)) << c.name << ": token " << token << " has p = 0";
      }
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
