#include "sampling/finish_reason.h"

#include <algorithm>

namespace rapide {

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kLength:
      return "length";
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kAbort:
      return "abort";
    case FinishReason::kError:
      return "error";
  }
  return "unknown";
}

std::optional<FinishReason> finish_after_token(const SamplingParams& params, int32_t token,
                                               bool is_end_of_generation, int32_t num_generated) {
  // The sampler bans these before min_tokens; checking the count again keeps a caller that
  // bypasses the sampler (e.g. forced tokens) from stopping early.
  if (num_generated > params.min_tokens) {
    if (is_end_of_generation && !params.ignore_eos) return FinishReason::kStop;
    const auto& stops = params.stop_token_ids;
    if (std::find(stops.begin(), stops.end(), token) != stops.end()) return FinishReason::kStop;
  }
  if (num_generated >= params.max_tokens) return FinishReason::kLength;
  return std::nullopt;
}

}  // namespace rapide
