// The truncation building blocks against brute-force references on large random rows,
// covering both top-k strategies (heap and nth_element) and top-p's chunked sorting.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "base/error.h"
#include "sampling/truncation.h"

namespace rapide {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// Logits rounded to a coarse grid so ties are frequent, with a few banned tokens.
std::vector<float> tied_logits(int vocab, uint64_t seed, float scale) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> logits(static_cast<size_t>(vocab));
  for (float& l : logits) l = std::round(normal(rng) * 4.0f) / 4.0f;
  for (size_t i = 0; i < logits.size(); i += 97) logits[i] = -kInf;
  return logits;
}

// Every finite token, fully sorted by ranks_before.
std::vector<Candidate> reference_order(const std::vector<float>& logits) {
  std::vector<Candidate> all;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (logits[i] != -kInf) all.push_back({static_cast<int32_t>(i), logits[i], 0.0f});
  }
  std::sort(all.begin(), all.end(), ranks_before);
  return all;
}

void expect_same_tokens(const std::vector<Candidate>& got, const std::vector<Candidate>& want,
                        size_t n) {
  ASSERT_GE(got.size(), n);
  ASSERT_GE(want.size(), n);
  for (size_t i = 0; i < n; ++i) {
    EXPECT_EQ(got[i].token, want[i].token) << "rank " << i;
    EXPECT_EQ(got[i].logit, want[i].logit) << "rank " << i;
  }
}

TEST(TruncationTest, ScanFindsLowestArgmaxAndRejectsNanAndInf) {
  const std::vector<float> logits = {-kInf, 2.0f, 5.0f, 5.0f, -kInf};
  const LogitStats stats = scan_logits(logits);
  EXPECT_EQ(stats.max_logit, 5.0f);
  EXPECT_EQ(stats.max_token, 2);
  EXPECT_EQ(stats.num_finite, 3);
  const std::vector<float> banned(3, -kInf);
  EXPECT_EQ(scan_logits(banned).max_token, -1);
  const std::vector<float> nan = {1.0f, std::nanf("")};
  EXPECT_THROW(scan_logits(nan), Error);
  const std::vector<float> inf = {1.0f, kInf};
  EXPECT_THROW(scan_logits(inf), Error);
}

TEST(TruncationTest, TopKHeapPathMatchesFullSort) {
  const std::vector<float> logits = tied_logits(32000, 1, 2.0f);
  const std::vector<Candidate> want = reference_order(logits);
  std::vector<Candidate> got;
  for (int64_t k : {1, 5, 40, 1000}) {
    select_top_k(logits, k, got);
    expect_same_tokens(got, want, static_cast<size_t>(k));
  }
}

TEST(TruncationTest, TopKNthElementPathMatchesFullSort) {
  const std::vector<float> logits = tied_logits(1000, 2, 1.0f);
  const std::vector<Candidate> want = reference_order(logits);
  std::vector<Candidate> got;
  for (int64_t k : {int64_t{100}, int64_t{500}, static_cast<int64_t>(want.size())}) {
    select_top_k(logits, k, got);
    expect_same_tokens(got, want, static_cast<size_t>(k));
  }
}

TEST(TruncationTest, CollectKeepsTokenOrderAndSumsAllFiniteLogits) {
  const std::vector<float> logits = {0.0f, -kInf, -1.0f, 1.0f, -3.0f};
  std::vector<Candidate> out;
  double sum = 0.0;
  const size_t n = collect_candidates(logits, 1.0f, -1.5f, out, &sum);
  ASSERT_EQ(n, 3u);
  EXPECT_EQ(out[0].token, 0);
  EXPECT_EQ(out[1].token, 2);
  EXPECT_EQ(out[2].token, 3);
  EXPECT_NEAR(sum, std::exp(-1.0) + std::exp(-2.0) + 1.0 + std::exp(-4.0), 1e-12);
}

TEST(TruncationTest, TopPOnUnsortedLargeRowMatchesReference) {
  // A flat row forces top-p through several doubling chunks of partial sorting.
  for (float top_p : {0.05f, 0.3f, 0.9f, 0.999f}) {
    const std::vector<float> logits = tied_logits(20000, 3, 0.5f);
    const std::vector<Candidate> want = reference_order(logits);
    double sum = 0.0;
    for (const Candidate& c : want) sum += std::exp(static_cast<double>(c.logit) - want[0].logit);
    size_t want_n = want.size();
    double cumulative = 0.0;
    for (size_t i = 0; i < want.size(); ++i) {
      cumulative += std::exp(static_cast<double>(want[i].logit) - want[0].logit) / sum;
      if (cumulative >= top_p) {
        want_n = i + 1;
        break;
      }
    }
    std::vector<Candidate> got;
    double got_sum = 0.0;
    const size_t n = collect_candidates(logits, want[0].logit, -kInf, got, &got_sum);
    const size_t kept = truncate_top_p({got.data(), n}, 0, want[0].logit, got_sum, top_p);
    EXPECT_GT(want_n, 64u) << "the case must span more than one chunk";
    EXPECT_EQ(kept, want_n) << "top_p " << top_p;
    expect_same_tokens(got, want, std::min(kept, want_n));
  }
}

TEST(TruncationTest, MinPFiltersInPlacePreservingOrder) {
  std::vector<Candidate> c = {{0, 0.0f, 0}, {1, -1.0f, 0}, {2, 2.0f, 0}, {3, 1.5f, 0}};
  // Relative to max 2.0: min_p 0.5 keeps logit >= 2 + log(0.5) = 1.307.
  const size_t n = truncate_min_p(c, 2.0f, 0.5f);
  ASSERT_EQ(n, 2u);
  EXPECT_EQ(c[0].token, 2);
  EXPECT_EQ(c[1].token, 3);
  EXPECT_EQ(min_p_threshold(2.0f, 0.0f), -kInf);
}

}  // namespace
}  // namespace rapide
