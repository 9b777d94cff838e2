#include "sampling/truncation.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/error.h"

namespace rapide {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// Top-k below vocab/16 uses a bounded heap: one comparison per token against the current
// k-th best rejects almost every token, and only k entries of scratch are touched.
constexpr int64_t kHeapSelectRatio = 16;

// The first chunk top-p sorts; later chunks double, so a flat distribution still costs
// O(n log n) in total while a peaked one (the common case) sorts only this many.
constexpr size_t kTopPFirstChunk = 64;

}  // namespace

LogitStats scan_logits(std::span<const float> logits) {
  LogitStats stats{-kInf, -1, 0};
  for (size_t i = 0; i < logits.size(); ++i) {
    const float logit = logits[i];
    if (!(logit < kInf)) {
      fail(ErrorCode::kInternal, "logits: token {} has value {} (the model produced NaN/inf)", i,
           logit);
    }
    if (logit == -kInf) continue;
    ++stats.num_finite;
    if (logit > stats.max_logit) {
      stats.max_logit = logit;
      stats.max_token = static_cast<int64_t>(i);
    }
  }
  return stats;
}

void select_top_k(std::span<const float> logits, int64_t k, std::vector<Candidate>& out) {
  const auto count = static_cast<size_t>(k);
  if (k * kHeapSelectRatio > static_cast<int64_t>(logits.size())) {
    double unused_sum = 0.0;
    const size_t n = collect_candidates(logits, -kInf, -kInf, out, &unused_sum);
    std::nth_element(out.begin(), out.begin() + (count - 1), out.begin() + n, ranks_before);
    std::sort(out.begin(), out.begin() + count, ranks_before);
    return;
  }
  if (out.size() < count) out.resize(count);
  // A max-heap under ranks_before keeps the worst of the best k at out[0].
  const auto heap_begin = out.begin();
  size_t size = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    const Candidate c{static_cast<int32_t>(i), logits[i], 0.0f};
    if (c.logit == -kInf) continue;
    if (size < count) {
      out[size++] = c;
      std::push_heap(heap_begin, heap_begin + size, ranks_before);
    } else if (ranks_before(c, out[0])) {
      std::pop_heap(heap_begin, heap_begin + size, ranks_before);
      out[size - 1] = c;
      std::push_heap(heap_begin, heap_begin + size, ranks_before);
    }
  }
  std::sort(heap_begin, heap_begin + size, ranks_before);
}

size_t collect_candidates(std::span<const float> logits, float max_logit, float threshold,
                          std::vector<Candidate>& out, double* sum_exp) {
  if (out.size() < logits.size()) out.resize(logits.size());
  double sum = 0.0;
  size_t n = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    const float logit = logits[i];
    if (logit == -kInf) continue;
    sum += std::exp(static_cast<double>(logit) - max_logit);
    if (logit >= threshold) out[n++] = {static_cast<int32_t>(i), logit, 0.0f};
  }
  *sum_exp = sum;
  return n;
}

size_t truncate_top_p(std::span<Candidate> candidates, size_t sorted, float max_logit,
                      double sum_exp, float top_p) {
  const size_t n = candidates.size();
  // Comparing the unnormalized running sum with top_p * sum_exp keeps exact cases exact
  // (four equal logits and top_p = 0.5 keep exactly two).
  const double target = static_cast<double>(top_p) * sum_exp;
  double cumulative = 0.0;
  for (size_t i = 0; i < n; ++i) {
    if (i == sorted) {
      const size_t end = std::min(n, sorted + std::max(kTopPFirstChunk, sorted));
      std::partial_sort(candidates.begin() + sorted, candidates.begin() + end, candidates.end(),
                        ranks_before);
      sorted = end;
    }
    cumulative += std::exp(static_cast<double>(candidates[i].logit) - max_logit);
    if (cumulative >= target) return i + 1;
  }
  return n;
}

float min_p_threshold(float max_logit, float min_p) {
  return min_p > 0.0f ? max_logit + std::log(min_p) : -kInf;
}

size_t truncate_min_p(std::span<Candidate> candidates, float max_logit, float min_p) {
  const float threshold = min_p_threshold(max_logit, min_p);
  const auto kept_end = std::remove_if(candidates.begin(), candidates.end(),
                                       [&](const Candidate& c) { return c.logit < threshold; });
  return static_cast<size_t>(kept_end - candidates.begin());
}

}  // namespace rapide
