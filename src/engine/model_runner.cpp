#include "engine/model_runner.h"

namespace rapide {

std::span<const float> ModelRunner::run(const StepPlan& plan) {
  batch_.clear();
  for (const ScheduledSequence& s : plan.sequences) {
    const int32_t fed = s.fed();
    const int32_t first_logits = fed - s.logits_rows;
    const int32_t n_tokens = static_cast<int32_t>(s.tokens.size());
    for (int32_t j = 0; j < fed; ++j) {
      const int32_t token = j < n_tokens ? s.tokens[j] : s.draft_tokens[j - n_tokens];
      batch_.add(token, s.kv_id, s.start_position + j, j >= first_logits);
    }
  }
  return model_.forward(batch_, kv_, pool_);
}

}  // namespace rapide
