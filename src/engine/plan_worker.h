// PlanWorker: runs step plans on memory of its own — a fresh KV replica and, when given, a
// fresh offload tier — as a tensor- or pipeline-parallel follower (distributed/
// mpi_parallel_job.cpp) and a replay of recorded plans do.
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
  // rows are as ModelRunner::run's (with `hidden_only`, ModelRunner::run_hidden's rows).
  // Throws what apply_kv_ops and the model throw.
  std::span<const float> execute(const StepPlan& plan, bool hidden_only = false);
  // The tier the plans' offload and restore ops use from now on (a follower learns its
  // settings with a later plan than its first).
  void set_tier(std::unique_ptr<OffloadTier> tier) { tier_ = std::move(tier); }
  const ReplicaKvStore& kv() const { return kv_; }
  const OffloadTier* tier() const { return tier_.get(); }

 private:
  ReplicaKvStore kv_;
  std::unique_ptr<OffloadTier> tier_;
  ModelRunner runner_;
};

}  // namespace rapide
