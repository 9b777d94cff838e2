#include "engine/plan_worker.h"

#include "kv/kv_op_executor.h"

namespace rapide {

PlanWorker::PlanWorker(Model& model, const KvLayout& layout, ThreadPool& pool,
                       std::unique_ptr<OffloadTier> tier)
    : kv_(layout), tier_(std::move(tier)), runner_(model, kv_, pool) {}

std::span<const float> PlanWorker::execute(const StepPlan& plan, bool hidden_only) {
  apply_kv_ops(plan.kv_ops, kv_, tier_.get());
  for (const ScheduledSequence& s : plan.sequences) kv_.set_table(s.kv_id, s.block_table);
  return hidden_only ? runner_.run_hidden(plan) : runner_.run(plan);
}

}  // namespace rapide
