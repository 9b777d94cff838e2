// ModelRunner: runs one StepPlan's forward pass. It turns the plan's sequences into the
// model's flat Batch (engine/batch_plan.h: tokens, then drafts, at consecutive positions from
// start_position) and returns the logits rows the plan asks for, in plan order (see
// engine/step.h).
//
// Kept apart from scheduling and sampling so that another way of running a step (a remote
// rank, a pipeline stage, a draft model) is another runner, not another engine.
//
// On the leader of a tensor- or pipeline-parallel model it also hands the plan to the
// followers (engine/plan_broadcast.h), so they run the same plan; with no followers nothing
// is encoded.
#pragma once

#include <optional>
#include <span>

#include "base/thread_pool.h"
#include "engine/step.h"
#include "kv/kv_store.h"
#include "kv/offload_tier.h"
#include "model/batch.h"
#include "model/model.h"

namespace rapide {

class ModelRunner {
 public:
  // The model, KV store and pool must outlive the runner.
  ModelRunner(Model& model, KvStore& kv, ThreadPool& pool) : model_(model), kv_(kv), pool_(pool) {}

  // One forward pass over every planned position. The span (plan.logits_rows() rows of
  // vocab_size floats) is valid until the next run. Throws what the model throws.
  std::span<const float> run(const StepPlan& plan);
  // The same pass without the head: every fed position's final hidden state (dim floats).
  std::span<const float> run_hidden(const StepPlan& plan);

  // The offload tier behind the plans' offload and restore ops: followers are told its
  // settings with the next plan, and keep a tier of their own like it.
  void announce_tier(const OffloadTierOptions& tier) { tier_to_announce_ = tier; }

 private:
  // Leader of a parallel model only: stages the plan for the followers.
  void publish(const StepPlan& plan, bool hidden_only);

  Model& model_;
  KvStore& kv_;
  ThreadPool& pool_;
  Batch batch_;
  std::optional<OffloadTierOptions> tier_to_announce_;
};

}  // namespace rapide
