// Whether compressing a prompt pays: scoring costs a pass of the scoring model over every
// context token not cached yet (token_scorer.h), plus the question once per passage; it saves the
// served model's prefill of the dropped tokens. Both per-token figures are measured (the scorer
// times its passes, the engine its prefill steps), so a scorer as large as the served model, or a
// context too small to matter, switches compression off for that request.
#pragma once

namespace rapide::compress {

struct CompressionCost {
  double scoring_seconds = 0.0;  // estimated
  double saved_seconds = 0.0;    // estimated
  bool worth_it() const { return scoring_seconds < saved_seconds; }
};

// `uncached_tokens`: the context tokens of passages the scorer has not cached.
CompressionCost estimate_compression_cost(int context_tokens, int uncached_tokens, int passages,
                                          int question_tokens, double ratio,
                                          double scoring_seconds_per_token,
                                          double prefill_seconds_per_token);

}  // namespace rapide::compress
