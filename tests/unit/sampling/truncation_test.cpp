// The truncation building blocks against brute-force references on large random rows,
// covering both top-k strategies (heap and nth_element) and top-p's chunked sorting.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "base/error.h"
#include "sampling/softmax_math.h"
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

// Long rows go through the 16-lane pass: the lowest argmax must win across lanes, whether
// the tie sits in an earlier or a later lane, and NaN/inf anywhere must be caught.
TEST(TruncationTest, ScanOfLongRowsMatchesANaiveScan) {
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  for (const size_t n : {size_t{16}, size_t{33}, size_t{1000}, size_t{32000}}) {
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<float> logits(n);
      for (float& x : logits) x = dist(rng);
      for (size_t i = 0; i < n; i += 7) logits[i] = -kInf;
      // Plant ties of a new maximum at a few random places.
      std::uniform_int_distribution<size_t> at(0, n - 1);
      for (int k = 0; k < trial % 4 + 1; ++k) logits[at(rng)] = 50.0f;
      int64_t want_token = -1, want_finite = 0;
      float want_max = -kInf;
      for (size_t i = 0; i < n; ++i) {
        if (logits[i] > -kInf) ++want_finite;
        if (logits[i] > want_max) {
          want_max = logits[i];
          want_token = static_cast<int64_t>(i);
        }
      }
      const LogitStats stats = scan_logits(logits);
      EXPECT_EQ(stats.max_logit, want_max) << n;
      EXPECT_EQ(stats.max_token, want_token) << n;
      EXPECT_EQ(stats.num_finite, want_finite) << n;
      logits[at(rng)] = trial % 2 ? std::nanf("") : kInf;
      EXPECT_THROW(scan_logits(logits), Error) << n;
    }
  }
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

TEST(TruncationTest, CollectKeepsTokenOrderAndDropsBanned) {
  const std::vector<float> logits = {0.0f, -kInf, -1.0f, 1.0f, -3.0f};
  std::vector<Candidate> out;
  const size_t n = collect_candidates(logits, -1.5f, out);
  ASSERT_EQ(n, 3u);
  EXPECT_EQ(out[0].token, 0);
  EXPECT_EQ(out[1].token, 2);
  EXPECT_EQ(out[2].token, 3);
  EXPECT_EQ(collect_candidates(logits, -kInf, out), 4u);
}

// The reference top-p count: full sort, then the smallest prefix reaching top_p.
size_t reference_top_p(const std::vector<Candidate>& sorted, float top_p) {
  double total = 0.0;
  for (const Candidate& c : sorted) total += fast_exp(c.logit - sorted[0].logit);
  double cumulative = 0.0;
  for (size_t i = 0; i < sorted.size(); ++i) {
    cumulative += fast_exp(sorted[i].logit - sorted[0].logit);
    if (cumulative >= top_p * total) return i + 1;
  }
  return sorted.size();
}

TEST(TruncationTest, TopPOnUnsortedLargeRowMatchesReference) {
  // Flat rows (small scale) put the boundary deep into the list, through many halvings.
  for (float scale : {0.5f, 2.0f, 6.0f}) {
    const std::vector<float> logits = tied_logits(20000, 3, scale);
    const std::vector<Candidate> want = reference_order(logits);
    const float max_logit = want[0].logit;
    for (float top_p : {0.05f, 0.3f, 0.9f, 0.999f}) {
      const size_t want_n = reference_top_p(want, top_p);
      std::vector<Candidate> got;
      const size_t n = collect_candidates(logits, -kInf, got);
      const size_t kept =
          truncate_top_p({got.data(), n}, false, max_logit, sum_exp(logits, max_logit), top_p);
      ASSERT_EQ(kept, want_n) << "scale " << scale << " top_p " << top_p;
      // The kept set is exactly the best-ranked want_n tokens, in some order.
      std::vector<Candidate> kept_set(got.begin(), got.begin() + static_cast<ptrdiff_t>(kept));
      std::sort(kept_set.begin(), kept_set.end(), ranks_before);
      expect_same_tokens(kept_set, want, kept);
    }
  }
}

TEST(TruncationTest, TopPOnSortedListWalksInOrder) {
  std::vector<Candidate> c = {{5, 2.0f, 0}, {1, 1.0f, 0}, {9, 0.0f, 0}, {2, -1.0f, 0}};
  double total = 0.0;
  for (const Candidate& x : c) total += fast_exp(x.logit - 2.0f);
  // Probabilities 0.644, 0.237, 0.087, 0.032.
  EXPECT_EQ(truncate_top_p(c, true, 2.0f, total, 0.6f), 1u);
  EXPECT_EQ(truncate_top_p(c, true, 2.0f, total, 0.7f), 2u);
  EXPECT_EQ(truncate_top_p(c, true, 2.0f, total, 0.95f), 3u);
  EXPECT_EQ(truncate_top_p(c, true, 2.0f, total, 0.98f), 4u);
  EXPECT_EQ(c[0].token, 5);
  EXPECT_EQ(c[3].token, 2);
  // With a larger total (tokens outside the list, e.g. dropped by min-p) the list may end
  // before top_p is reached: then all of it stays.
  EXPECT_EQ(truncate_top_p(c, true, 2.0f, total * 2, 0.9f), 4u);
}

TEST(TruncationTest, FastExpMatchesStdExp) {
  double worst = 0.0;
  for (float x = -87.0f; x <= 88.0f; x += 0.0137f) {
    const double want = std::exp(static_cast<double>(x));
    worst = std::max(worst, std::abs(fast_exp(x) - want) / want);
  }
  EXPECT_LT(worst, 3e-7);
  EXPECT_EQ(fast_exp(0.0f), 1.0f);
  EXPECT_EQ(fast_exp(-kInf), 0.0f);
  EXPECT_EQ(fast_exp(-100.0f), 0.0f);
  const std::vector<float> row = {0.0f, -kInf, std::log(3.0f), 0.0f, 0.0f,
                                  0.0f, 0.0f,  0.0f,           0.0f, 0.0f};
  EXPECT_NEAR(sum_exp(row, 0.0f), 11.0, 1e-5);
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
