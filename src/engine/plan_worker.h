// PlanWorker: runs recorded step plans on memory of its own — a fresh KV replica and, when
// given, a fresh offload tier — as another rank or a replay would.
//
// Everything a step does to KV memory is in its plan (engine/step.h): the kv_ops the
// scheduling made (copies, offloads, restores, imports), then the forward pass over the
// plan's block tables. A PlanWorker applies both, so a sequence of plans recorded from an
// engine with prefix caching, an offload tier and speculation reproduces the engine's
// logits without its scheduler, its pool or its prefix cache. The plans must be run in
// order, from the first the engine made.
#pragma once

#include <memory>
#include <span>

#include "base/thread_pool.h"
#include "engine/model_runner.h"
#include "engine/step.h"
#include "kv/offload_tier.h"
#include "kv/replica_kv_store.h"
#include "model/model.h"

namespace rapide {

class PlanWorker {
 public:
  // `layout` must be the recording engine's; `tier` (may be null) stands for its offload
  // tier (same capacities, so the same blocks stay). Model and pool must outlive the worker.
  PlanWorker(Model& model, const KvLayout& layout, ThreadPool& pool,
             std::unique_ptr<OffloadTier> tier = nullptr);

  // Applies the plan's KV ops, takes its block tables and runs its forward pass; the logits
  // rows are as ModelRunner::run's. Throws what apply_kv_ops and the model throw.
  std::span<const float> execute(const StepPlan& plan);
  const ReplicaKvStore& kv() const { return kv_; }

 private:
  ReplicaKvStore kv_;
  std::unique_ptr<OffloadTier> tier_;
  ModelRunner runner_;
};

}  // namespace rapide
