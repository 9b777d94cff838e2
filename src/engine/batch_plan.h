// A StepPlan and the model's flat Batch, both ways.
//
// batch_for_plan is how every plan becomes a forward pass (ModelRunner): each sequence's fed
// tokens (tokens, then drafts) at consecutive positions from start_position, its last
// logits_rows of them flagged for logits, sequences in plan order.
//
// plan_for_batch is its inverse, for the forward passes that no scheduler planned (perplexity,
// pruning, calibration: a Batch over a KV store of their own) but that tensor- and
// pipeline-parallel followers must still run: followers only ever receive plans
// (engine/plan_broadcast.h). The batch is cut into runs of one sequence at consecutive
// positions whose logits flags are all set after the first set one; each run is one
// ScheduledSequence, so batch_for_plan(plan_for_batch(b)) == b for every batch.
#pragma once

#include "engine/step.h"
#include "kv/kv_store.h"
#include "model/batch.h"

namespace rapide {

// Replaces `batch`'s contents with the plan's pass.
void batch_for_plan(const StepPlan& plan, Batch& batch);

// A plan running exactly `batch`, its block tables read from `kv` (as they are for the pass:
// the caller reserved the positions). Request ids are 0: nobody samples from it.
StepPlan plan_for_batch(const Batch& batch, const KvStore& kv);

}  // namespace rapide
