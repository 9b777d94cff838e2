// Prompt compression end to end: the marked context of one or more texts (a completions
// prompt, or the contents of a chat's messages, compressed together) is scored by a
// TokenScorer, planned (compression_plan.h) and written back without the delimiters.
//
// Texts without a marked context, a ratio of 1, or a context under kMinContextTokens pass
// through untouched (only the delimiters are removed). Ratios count the scorer's tokens.
#pragma once

#include <string>
#include <vector>

#include "compress/compression_cost.h"
#include "compress/token_scorer.h"

namespace rapide::compress {

// Below this many context tokens there is nothing worth scoring.
inline constexpr int kMinContextTokens = 32;

struct CompressionRequest {
  double ratio = 1.0;    // kept / original context tokens, in (0, 1]
  std::string question;  // empty: the text after the last "</context>", if any
  bool force = false;    // compress even when the cost estimate says it does not pay
};

struct CompressionReport {
  bool applied = false;
  std::string reason;  // why not, when not applied
  int passages = 0;
  int kept_passages = 0;
  int context_tokens = 0;  // scorer tokens
  int kept_context_tokens = 0;
  double seconds = 0.0;  // the whole call, scoring included
  CompressionCost cost;  // the estimate that decided (zero when not estimated)
};

class PromptCompressor {
 public:
  explicit PromptCompressor(TokenScorer& scorer) : scorer_(scorer) {}

  // Rewrites `texts` in place. `prefill_seconds_per_token` is the served model's measured
  // prefill cost; 0 skips the cost check. Throws Error(kInvalidArgument) for malformed
  // delimiters or a ratio outside (0, 1].
  CompressionReport compress(std::vector<std::string>& texts, const CompressionRequest& request,
                             double prefill_seconds_per_token);

 private:
  TokenScorer& scorer_;
};

}  // namespace rapide::compress
