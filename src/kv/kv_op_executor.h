// Runs KV memory ops (model/kv_ops.h) on a store's block memory: what a tensor- or
// pipeline-parallel follower and a replay do with a plan's ops before its forward pass.
//
// The store whose accounting emitted the ops has already made the same moves on its own
// memory; an executor repeats them on other memory (another rank's shard of every block, a
// fresh store), with `tier` (may be null) standing for that memory's offload tier. Offload
// ops store into `tier`; restore ops load from it and must find the block: the emitting
// store restored it, and the same offloads reached this tier before; forget ops drop what
// the emitter's tier dropped.
#pragma once

#include <span>

#include "kv/kv_store.h"
#include "kv/offload_tier.h"
#include "model/kv_ops.h"

namespace rapide {

// Applies `ops` in order. Throws Error(kCorrupt) for an op naming a negative block or bytes
// of the wrong size, and Error(kUnsupported) for an offload, restore or forget without a
// tier, or a restore the tier cannot serve (this memory diverged from the emitter's).
void apply_kv_ops(std::span<const KvOp> ops, KvStore& memory, OffloadTier* tier);

}  // namespace rapide
