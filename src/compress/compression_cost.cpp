#include "compress/compression_cost.h"

#include <algorithm>

namespace rapide::compress {

CompressionCost estimate_compression_cost(int context_tokens, int passages, int question_tokens,
                                          double ratio, double scoring_seconds_per_token,
                                          double prefill_seconds_per_token) {
  CompressionCost cost;
  // One BOS per passage pass, and the question after each passage.
  const double scored = context_tokens + static_cast<double>(passages) * (1 + question_tokens);
  cost.scoring_seconds = scored * scoring_seconds_per_token;
  cost.saved_seconds =
      context_tokens * (1.0 - std::clamp(ratio, 0.0, 1.0)) * prefill_seconds_per_token;
  return cost;
}

}  // namespace rapide::compress
