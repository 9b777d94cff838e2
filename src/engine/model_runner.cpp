#include "engine/model_runner.h"

#include "engine/batch_plan.h"
#include "engine/plan_broadcast.h"
#include "model/pipeline_parallel.h"
#include "model/tensor_parallel.h"

namespace rapide {

void ModelRunner::publish(const StepPlan& plan, bool hidden_only) {
  TensorParallel* tp = model_.tensor_parallel();
  PipelineParallel* pp = model_.pipeline_parallel();
  const bool leader = (tp == nullptr || tp->rank() == 0) && (pp == nullptr || pp->stage() == 0);
  if ((tp == nullptr && pp == nullptr) || !leader) return;
  BroadcastHeader header;
  header.kv_block_size = kv_.layout().block_size;
  header.kv_type = kv_.layout().type;
  header.hidden_only = hidden_only;
  header.tier = std::move(tier_to_announce_);
  tier_to_announce_.reset();
  std::vector<uint8_t> encoded = encode_plan_broadcast(header, plan);
  // With --tp and --pp together the model holds both; the job behind them is one.
  if (pp != nullptr) {
    pp->stage_plan(std::move(encoded));
  } else {
    tp->stage_plan(std::move(encoded));
  }
}

std::span<const float> ModelRunner::run(const StepPlan& plan) {
  publish(plan, false);
  batch_for_plan(plan, batch_);
  return model_.forward(batch_, kv_, pool_);
}

std::span<const float> ModelRunner::run_hidden(const StepPlan& plan) {
  publish(plan, true);
  batch_for_plan(plan, batch_);
  return model_.forward_hidden(batch_, kv_, pool_);
}

}  // namespace rapide
