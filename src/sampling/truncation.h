// Candidate lists and the truncation samplers that shrink them: top-k, top-p, min-p.
//
// Sorting a 150k-entry vocabulary per token costs more than the rest of sampling together,
// so nothing here sorts more than it must: top-k selects with a bounded heap (or
// nth_element for large k), top-p narrows down its boundary by halving with nth_element,
// and min-p only filters.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace rapide {

// A token still in the running: its processed logit (before temperature) and, once the
// sampler has drawn, its probability under the final distribution.
struct Candidate {
  int32_t token = 0;
  float logit = 0.0f;
  float prob = 0.0f;
};

// The ranking every step uses: higher logit first, ties to the lower token id, so results
// never depend on sort stability or on the order of the input.
inline bool ranks_before(const Candidate& a, const Candidate& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.token < b.token);
}

// Statistics of the finite entries of a logits row.
struct LogitStats {
  float max_logit;     // -inf when no entry is finite
  int64_t max_token;   // the lowest id holding max_logit; -1 when none
  int64_t num_finite;  // entries > -inf
};

// Throws Error(kInternal) on NaN or +inf: such logits mean the model is broken, and they
// would silently corrupt every comparison below.
LogitStats scan_logits(std::span<const float> logits);

// Writes the k best finite logits of the row into out[0, k), best first; `out` grows to fit.
// Requires 0 < k <= stats.num_finite.
void select_top_k(std::span<const float> logits, int64_t k, std::vector<Candidate>& out);

// Writes every finite logit >= threshold into `out` in token order and returns how many;
// `out` grows to fit.
size_t collect_candidates(std::span<const float> logits, float threshold,
                          std::vector<Candidate>& out);

// Top-p over the candidates: keeps the smallest best-ranked set whose probability
// (exp(logit - max_logit) / total_weight) adds up to >= top_p, as llama.cpp does, and
// returns its size (>= 1 for a non-empty list). total_weight is the sum of
// exp(logit - max_logit) over the distribution top-p sees, which may be larger than the
// list (min-p may have pre-filtered it). `sorted` says the list is in ranks_before order
// (after top-k). Otherwise the kept set is found by repeated halving with nth_element,
// which is O(n) however flat the distribution is, and ends up first in the list, sorted
// only near its boundary. Uses Candidate::prob as scratch.
size_t truncate_top_p(std::span<Candidate> candidates, bool sorted, float max_logit,
                      double total_weight, float top_p);

// Min-p: keeps candidates whose probability is >= min_p times the best one's, i.e.
// logit >= max_logit + log(min_p); order is preserved. Returns the new count.
size_t truncate_min_p(std::span<Candidate> candidates, float max_logit, float min_p);

// The logit a token needs to survive min_p (-inf when min_p is 0).
float min_p_threshold(float max_logit, float min_p);

}  // namespace rapide
