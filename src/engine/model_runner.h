// ModelRunner: runs one StepPlan's forward pass. It turns the plan's sequences into the
// model's flat Batch (tokens, then drafts, at consecutive positions from start_position)
// and returns the logits rows the plan asks for, in plan order (see engine/step.h).
//
// Kept apart from scheduling and sampling so that another way of running a step (a remote
// rank, a pipeline stage, a draft model) is another runner, not another engine.
#pragma once

#include <span>

#include "base/thread_pool.h"
#include "engine/step.h"
#include "kv/kv_store.h"
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

 private:
  Model& model_;
  KvStore& kv_;
  ThreadPool& pool_;
  Batch batch_;
};

}  // namespace rapide
