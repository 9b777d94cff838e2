#include "compress/compression_cost.h"

#include <algorithm>

namespace rapide::compress {

CompressionCost estimate_compression_cost(int context_tokens, int uncached_tokens, int passages,
                                          int question_tokens, double ratio,
                                          double scoring_seconds_per_token,
                                          double prefill_seconds_per_token) {
  CompressionCost cost;
  // The uncached passages (a BOS each, counted as a token), the question after every one.
  const double scored = uncached_tokens + static_cast<double>(passages) * (1 + question_tokens);
  cost.scoring_seconds = scored * scoring_seconds_per_token;
  cost.saved_seconds =
      context_tokens * (1.0 - std::clamp(ratio, 0.0, 1.0)) * prefill_seconds_per_token;
  return cost;
}

}  // namespace rapide::compress
