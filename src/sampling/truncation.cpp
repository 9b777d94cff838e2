#include "sampling/truncation.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/error.h"
#include "sampling/softmax_math.h"

namespace rapide {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// Top-k below vocab/16 uses a bounded heap: one comparison per token against the current
// k-th best rejects almost every token, and only k entries of scratch are touched.
constexpr int64_t kHeapSelectRatio = 16;

// Top-p stops halving and sorts once the range holding its boundary is this small.
constexpr size_t kTopPSortBelow = 64;

}  // namespace

// Runs once per sampled token over the whole vocabulary (a tenth of a batch step's serial
// time before it was vectorized): a clone for AVX-512 machines besides the baseline one,
// chosen at load time. The result is exact either way (max, first index, counts, flags).
__attribute__((target_clones("arch=x86-64-v4", "default"))) LogitStats scan_logits(
    std::span<const float> logits) {
  // Sixteen independent lanes of 32-bit values and no branches let the compiler vectorize
  // the pass. Each lane keeps its first index of its maximum (strictly greater replaces);
  // the rare error path looks for the offending entry afterwards.
  constexpr size_t kLanes = 16;
  float lane_max[kLanes];
  uint32_t lane_index[kLanes] = {};
  uint32_t lane_finite[kLanes] = {};
  uint32_t lane_bad[kLanes] = {};
  std::fill(lane_max, lane_max + kLanes, -kInf);
  const size_t n = logits.size();
  const float* x = logits.data();
  const size_t full = n - n % kLanes;
  for (size_t i = 0; i < full; i += kLanes) {
    for (size_t j = 0; j < kLanes; ++j) {
      const float logit = x[i + j];
      const bool better = logit > lane_max[j];
      lane_max[j] = better ? logit : lane_max[j];
      lane_index[j] = better ? static_cast<uint32_t>(i + j) : lane_index[j];
      lane_finite[j] += logit > -kInf ? 1u : 0u;
      lane_bad[j] |= logit < kInf ? 0u : 1u;
    }
  }
  for (size_t i = full; i < n; ++i) {
    const float logit = x[i];
    if (logit > lane_max[0]) {  // later than every index lane 0 holds: ties keep the earlier
      lane_max[0] = logit;
      lane_index[0] = static_cast<uint32_t>(i);
    }
    lane_finite[0] += logit > -kInf ? 1u : 0u;
    lane_bad[0] |= logit < kInf ? 0u : 1u;
  }
  LogitStats stats{-kInf, -1, 0};
  bool bad = false;
  for (size_t j = 0; j < kLanes; ++j) {
    stats.num_finite += lane_finite[j];
    bad |= lane_bad[j] != 0;
    if (lane_max[j] == -kInf) continue;  // this lane saw no finite logit
    // The first index of the overall maximum: the smallest lane index among the lanes
    // that reached it.
    if (lane_max[j] > stats.max_logit ||
        (lane_max[j] == stats.max_logit && lane_index[j] < stats.max_token)) {
      stats.max_logit = lane_max[j];
      stats.max_token = lane_index[j];
    }
  }
  if (bad) {
    const auto it = std::find_if(logits.begin(), logits.end(), [](float l) { return !(l < kInf); });
    fail(ErrorCode::kInternal, "logits: token {} has value {} (the model produced NaN/inf)",
         it - logits.begin(), *it);
  }
  if (stats.num_finite == 0) stats.max_token = -1;
  return stats;
}

void select_top_k(std::span<const float> logits, int64_t k, std::vector<Candidate>& out) {
  const auto count = static_cast<size_t>(k);
  if (k * kHeapSelectRatio > static_cast<int64_t>(logits.size())) {
    const size_t n = collect_candidates(logits, -kInf, out);
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

size_t collect_candidates(std::span<const float> logits, float threshold,
                          std::vector<Candidate>& out) {
  if (out.size() < logits.size()) out.resize(logits.size());
  size_t n = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    const float logit = logits[i];
    if (logit > -kInf && logit >= threshold) out[n++] = {static_cast<int32_t>(i), logit, 0.0f};
  }
  return n;
}

namespace {

// Top-p's first narrowing step: a histogram of the probability mass over logit buckets
// below the maximum finds the bucket holding the boundary in two branch-light passes,
// where comparison-based selection on random logits would pay a branch mispredict per
// comparison. Buckets are kTopPBucketRange / kTopPBuckets logits wide; the last one also
// takes everything further below (weights under e^-32 there).
constexpr int kTopPBuckets = 256;
constexpr float kTopPBucketRange = 32.0f;

struct Range {
  size_t lo;
  size_t hi;
  double before;  // weight of [0, lo)
};

// Reorders the candidates so [0, lo) holds the buckets above the boundary bucket and
// [lo, hi) the boundary bucket; candidates' prob must hold their weights.
Range narrow_by_buckets(std::span<Candidate> candidates, float max_logit, double target) {
  constexpr float kScale = kTopPBuckets / kTopPBucketRange;
  const auto bucket_of = [&](const Candidate& c) {
    return std::min(kTopPBuckets - 1, static_cast<int>((max_logit - c.logit) * kScale));
  };
  double bucket_weight[kTopPBuckets] = {};
  for (const Candidate& c : candidates) bucket_weight[bucket_of(c)] += c.prob;
  int boundary = 0;
  double before = 0.0;
  while (boundary < kTopPBuckets - 1 && before + bucket_weight[boundary] < target) {
    before += bucket_weight[boundary++];
  }
  const auto above_end =
      std::partition(candidates.begin(), candidates.end(),
                     [&](const Candidate& c) { return bucket_of(c) < boundary; });
  const auto boundary_end = std::partition(
      above_end, candidates.end(), [&](const Candidate& c) { return bucket_of(c) == boundary; });
  // The bucket sums and the per-candidate walk round differently; the walk decides.
  double exact_before = 0.0;
  for (auto it = candidates.begin(); it != above_end; ++it) exact_before += it->prob;
  return {static_cast<size_t>(above_end - candidates.begin()),
          static_cast<size_t>(boundary_end - candidates.begin()), exact_before};
}

}  // namespace

size_t truncate_top_p(std::span<Candidate> candidates, bool sorted, float max_logit,
                      double total_weight, float top_p) {
  for (Candidate& c : candidates) c.prob = fast_exp(c.logit - max_logit);
  // Comparing unnormalized running sums with top_p * total_weight keeps exact cases exact
  // (four equal logits and top_p = 0.5 keep exactly two).
  const double target = static_cast<double>(top_p) * total_weight;
  // Invariant: [0, lo) ranks before [lo, hi), which ranks before [hi, n); `before` is the
  // weight of [0, lo); the boundary token lies in [lo, hi) unless rounding says otherwise.
  Range range{0, candidates.size(), 0.0};
  if (!sorted && candidates.size() > kTopPSortBelow) {
    range = narrow_by_buckets(candidates, max_logit, target);
  }
  const auto at = [&](size_t i) { return candidates.begin() + static_cast<ptrdiff_t>(i); };
  // A boundary bucket can still be large (a flat distribution, or the catch-all bucket):
  // halve it with nth_element until it is small enough to sort.
  while (!sorted && range.hi - range.lo > kTopPSortBelow) {
    const size_t mid = range.lo + (range.hi - range.lo) / 2;
    std::nth_element(at(range.lo), at(mid), at(range.hi), ranks_before);
    double weight = 0.0;
    for (size_t i = range.lo; i < mid; ++i) weight += candidates[i].prob;
    if (range.before + weight >= target) {
      range.hi = mid;
    } else {
      range.before += weight;
      range.lo = mid;
    }
  }
  if (!sorted) std::sort(at(range.lo), at(range.hi), ranks_before);
  double cumulative = range.before;
  if (cumulative >= target && range.lo > 0) return range.lo;  // rounding moved the boundary up
  for (size_t i = range.lo; i < range.hi; ++i) {
    cumulative += candidates[i].prob;
    if (cumulative >= target) return i + 1;
  }
  // Only reached through rounding, or when the list ends first (min-p pre-filtered it):
  // everything up to the boundary range stays.
  return range.hi;
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
