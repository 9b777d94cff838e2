#include "engine/batch_plan.h"

namespace rapide {

void batch_for_plan(const StepPlan& plan, Batch& batch) {
  batch.clear();
  for (const ScheduledSequence& s : plan.sequences) {
    const int32_t fed = s.fed();
    const int32_t first_logits = fed - s.logits_rows;
    const int32_t n_tokens = static_cast<int32_t>(s.tokens.size());
    for (int32_t j = 0; j < fed; ++j) {
      const int32_t token = j < n_tokens ? s.tokens[j] : s.draft_tokens[j - n_tokens];
      batch.add(token, s.kv_id, s.start_position + j, j >= first_logits, s.adapter);
    }
  }
}

StepPlan plan_for_batch(const Batch& batch, const KvStore& kv) {
  StepPlan plan;
  for (int i = 0; i < batch.size(); ++i) {
    const int32_t seq = batch.seq_ids[i];
    const bool logits = batch.needs_logits[i] != 0;
    ScheduledSequence* run = plan.sequences.empty() ? nullptr : &plan.sequences.back();
    // A run continues while its sequence and positions do and no logits row would come
    // before a row without one (logits rows are a run's trailing ones).
    const int32_t adapter = batch.adapters.empty() ? -1 : batch.adapters[i];
    const bool continues = run != nullptr && run->kv_id == seq && run->adapter == adapter &&
                           run->start_position + run->fed() == batch.positions[i] &&
                           (logits || run->logits_rows == 0);
    if (!continues) {
      ScheduledSequence s;
      s.kv_id = seq;
      s.start_position = batch.positions[i];
      s.adapter = adapter;
      const std::span<const int32_t> table = kv.block_table(seq);
      s.block_table.assign(table.begin(), table.end());
      plan.sequences.push_back(std::move(s));
      run = &plan.sequences.back();
    }
    run->tokens.push_back(batch.tokens[i]);
    if (logits) ++run->logits_rows;
  }
  return plan;
}

}  // namespace rapide
