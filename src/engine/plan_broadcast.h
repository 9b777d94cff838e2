// What a tensor- or pipeline-parallel leader sends its followers before every forward pass:
// the StepPlan the pass runs (the engine's own plan, or plan_for_batch's for a pass no
// scheduler planned, engine/batch_plan.h) and the little a follower's memory needs to run it
// the way PlanWorker does (engine/plan_worker.h): the KV block size and type (a follower's
// layout is its own shard's heads and layers cut the same way), whether the pass stops
// before the head, and, once, the leader's offload tier settings (each follower keeps a tier
// of its own holding its shard of every offloaded block).
//
// Encoded as compact binary, not step_json: it is written on the engine thread inside every
// step under --tp / --pp. Measured on the engine's own plans with prefix caching, an offload
// tier and speculation (step_replay_test prints it; 162 plans): 249 bytes and 1.3 us to write
// and read per plan, against step_json's 620 bytes and 53 us. Fixed-width little-endian fields
// (every rank of a job runs the same binary on the same architecture). Every field of step_json's
// plan round-trips (draft_distributions is in neither: only the leader's sampler reads it).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "engine/step.h"
#include "kv/kv_store.h"
#include "kv/offload_tier.h"

namespace rapide {

// What comes with the plan.
struct BroadcastHeader {
  int32_t kv_block_size = 16;
  KvType kv_type = KvType::kF16;
  bool hidden_only = false;  // Model::forward_hidden (no head) rather than forward
  // The leader's offload tier (capacities, codec, directory), sent with the first pass after
  // the engine made one; followers derive theirs from it.
  std::optional<OffloadTierOptions> tier;
};

struct PlanBroadcast {
  BroadcastHeader header;
  StepPlan plan;
};

std::vector<uint8_t> encode_plan_broadcast(const BroadcastHeader& header, const StepPlan& plan);
// Throws Error(kCorrupt) naming what is wrong for bytes that are not an encoded broadcast
// (bad magic, truncated, trailing bytes, an unknown op or KV type).
PlanBroadcast decode_plan_broadcast(std::span<const uint8_t> bytes);

}  // namespace rapide
