#include "engine/model_runner.h"

#include "model/pipeline_parallel.h"
#include "model/tensor_parallel.h"

namespace rapide {

std::span<const float> ModelRunner::run(const StepPlan& plan) {
  // The scheduler's store already made the plan's block moves; other ranks' shards make them
  // as the pass arrives.
  if (!plan.kv_ops.empty()) {
    if (TensorParallel* tp = model_.tensor_parallel()) {
      tp->stage_kv_ops(plan.kv_ops);
    } else if (PipelineParallel* pp = model_.pipeline_parallel()) {
      pp->stage_kv_ops(plan.kv_ops);
    }
  }
  batch_.clear();
  for (const ScheduledSequence& s : plan.sequences) {
    const int32_t fed = s.fed();
    const int32_t first_logits = fed - s.logits_rows;
    const int32_t n_tokens = static_cast<int32_t>(s.tokens.size());
    for (int32_t j = 0; j < fed; ++j) {
      const int32_t token = j < n_tokens ? s.tokens[j] : s.draft_tokens[j - n_tokens];
      batch_.add(token, s.kv_id, s.start_position + j, j >= first_logits, s.adapter);
    }
  }
  return model_.forward(batch_, kv_, pool_);
}

}  // namespace rapide
