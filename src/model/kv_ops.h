// KV memory operations as plain data: everything that changes the bytes of KV blocks
// outside a forward pass, in the order it happened.
//
// The KV store's accounting (block tables, reference counts, the prefix directory) decides
// that bytes move; these ops say which. A step plan carries the ops its scheduling made
// (engine/step.h), so whoever runs the plan on other memory — a tensor- or pipeline-parallel
// follower holding its own shard of every block, a replay over a fresh store — makes the
// same moves before the same forward pass and ends with the same K/V. Ops run in order, all
// of them before the step's forward pass: an op that reads a block (offload) comes before
// any op or pass that reuses that block's memory, because the store emits it when it
// decides the reuse.
//
// Block numbers are the store's; slots count token positions inside a block.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

namespace rapide {

struct KvOp {
  enum class Kind : uint8_t {
    kCopy = 0,       // whole block src -> dst (copy-on-write of a shared block)
    kCopySlots = 1,  // the first `slots` positions of src -> dst (a partial prefix hit)
    kOffload = 2,    // block src's bytes join the offload tier under `hash` (eviction)
    kRestore = 3,    // the offload tier's block `hash` -> dst (a prefix hit from the tier)
    kImport = 4,     // `bytes` -> dst (K/V computed elsewhere: disaggregation)
    // The offload tier let block `hash` go (for room, or found corrupt): a tier that mirrors
    // it (a follower's) lets it go too, so it never holds more than the emitter's.
    kForget = 5,
  };
  Kind kind = Kind::kCopy;
  int32_t src = -1;
  int32_t dst = -1;
  int32_t slots = 0;
  uint64_t hash = 0;
  // kOffload: what the tier's file header records (the parent block's hash, the tokens).
  uint64_t parent = 0;
  std::vector<int32_t> tokens;
  // kImport: one block's bytes (the store's block_bytes), shared, not copied with the op.
  std::shared_ptr<const std::vector<uint8_t>> bytes;

  static KvOp copy(int32_t src, int32_t dst) {
    KvOp op;
    op.kind = Kind::kCopy;
    op.src = src;
    op.dst = dst;
    return op;
  }
  static KvOp copy_slots(int32_t src, int32_t dst, int32_t slots) {
    KvOp op = copy(src, dst);
    op.kind = Kind::kCopySlots;
    op.slots = slots;
    return op;
  }
  static KvOp offload(int32_t src, uint64_t hash, uint64_t parent, std::vector<int32_t> tokens) {
    KvOp op;
    op.kind = Kind::kOffload;
    op.src = src;
    op.hash = hash;
    op.parent = parent;
    op.tokens = std::move(tokens);
    return op;
  }
  static KvOp restore(int32_t dst, uint64_t hash) {
    KvOp op;
    op.kind = Kind::kRestore;
    op.dst = dst;
    op.hash = hash;
    return op;
  }
  static KvOp forget(uint64_t hash) {
    KvOp op;
    op.kind = Kind::kForget;
    op.hash = hash;
    return op;
  }
  static KvOp import(int32_t dst, std::shared_ptr<const std::vector<uint8_t>> bytes) {
    KvOp op;
    op.kind = Kind::kImport;
    op.dst = dst;
    op.bytes = std::move(bytes);
    return op;
  }
};

inline const char* kv_op_kind_name(KvOp::Kind kind) {
  switch (kind) {
    case KvOp::Kind::kCopy:
      return "copy";
    case KvOp::Kind::kCopySlots:
      return "copy_slots";
    case KvOp::Kind::kOffload:
      return "offload";
    case KvOp::Kind::kRestore:
      return "restore";
    case KvOp::Kind::kImport:
      return "import";
    case KvOp::Kind::kForget:
      return "forget";
  }
  return "unknown";
}

}  // namespace rapide
