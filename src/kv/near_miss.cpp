#include "kv/near_miss.h"

#include <algorithm>
#include <cstdlib>
#include <unordered_set>

namespace rapide {

namespace {

// Differing values up to this many tokens on either side are looked for (a UUID is 20-40
// tokens in most vocabularies, an ISO timestamp 10-20).
constexpr size_t kRealignWindow = 64;
// Equal tokens that count as falling back in step: longer than the punctuation and short
// words two unrelated texts share by chance (a word is 2-5 tokens in a small vocabulary, and
// the cached side goes on with the earlier request's output). A prompt that ends sooner
// after the difference has too little left to be worth reusing.
constexpr size_t kRunTokens = 8;
// After the realignment, the share of the following tokens that must agree in step.
constexpr double kAgreeAfter = 0.5;
// The content comparison: n-gram length, tokens looked at on each side, and the share of
// the prompt's n-grams the cached chain must have.
constexpr size_t kGram = 8;
constexpr size_t kContentTokens = 1024;
constexpr double kContentShare = 0.6;
constexpr size_t kFewestGrams = 8;

uint64_t gram_hash(std::span<const int32_t> t) {
  uint64_t h = 1469598103934665603ull;
  for (const int32_t x : t) h = (h ^ static_cast<uint32_t>(x)) * 1099511628211ull;
  return h;
}

size_t run_length(std::span<const int32_t> a, size_t i, std::span<const int32_t> b, size_t j) {
  size_t r = 0;
  while (i + r < a.size() && j + r < b.size() && a[i + r] == b[j + r]) ++r;
  return r;
}

}  // namespace

NearMiss compare_after_divergence(std::span<const int32_t> prompt,
                                  std::span<const int32_t> cached) {
  NearMiss out;
  if (prompt.empty() || cached.empty()) return out;
  // In step: the realignment (i, j) with the smallest i + j, of equals the most balanced.
  const size_t max_i = std::min(prompt.size(), kRealignWindow);
  const size_t max_j = std::min(cached.size(), kRealignWindow);
  for (size_t d = 1; d <= max_i + max_j && !out.realigned; ++d) {
    size_t best_i = 0;
    bool found = false;
    for (size_t i = d > max_j ? d - max_j : 0; i <= std::min(d, max_i); ++i) {
      const size_t j = d - i;
      if (prompt.size() - i < kRunTokens) continue;
      if (run_length(prompt, i, cached, j) < kRunTokens) continue;
      // It must go on agreeing (a common phrase in two different texts does not).
      const size_t span = std::min(prompt.size() - i, cached.size() - j);
      size_t equal = 0;
      for (size_t k = 0; k < span; ++k) equal += prompt[i + k] == cached[j + k] ? 1 : 0;
      if (static_cast<double>(equal) < kAgreeAfter * static_cast<double>(span)) continue;
      const auto balance = [d](size_t x) {
        return std::abs(static_cast<long>(2 * x) - static_cast<long>(d));
      };
      if (!found || balance(i) < balance(best_i)) best_i = i;
      found = true;
    }
    if (found) {
      out.near = out.realigned = true;
      out.prompt_differs = static_cast<int>(best_i);
      out.cached_differs = static_cast<int>(d - best_i);
    }
  }
  if (out.near) return out;
  // By content: the prompt's n-grams after the difference, looked up in the cached chain's.
  const auto p = prompt.subspan(1, std::min(prompt.size() - 1, kContentTokens));
  const auto c = cached.first(std::min(cached.size(), kContentTokens));
  if (p.size() < kGram + kFewestGrams || c.size() < kGram) return out;
  std::unordered_set<uint64_t> grams;
  for (size_t i = 0; i + kGram <= c.size(); ++i) grams.insert(gram_hash(c.subspan(i, kGram)));
  size_t found = 0, total = 0;
  for (size_t i = 0; i + kGram <= p.size(); ++i, ++total) {
    found += grams.count(gram_hash(p.subspan(i, kGram)));
  }
  out.near = static_cast<double>(found) >= kContentShare * static_cast<double>(total);
  return out;
}

}  // namespace rapide
