#include "kv/kv_op_executor.h"

#include <cstring>

#include "base/error.h"
#include "kernels/kv_rows.h"

namespace rapide {

namespace {

uint8_t* block_of(KvStore& memory, int32_t block, const KvOp& op) {
  if (block < 0) {
    fail(ErrorCode::kCorrupt, "KV op {}: block number {}", kv_op_kind_name(op.kind), block);
  }
  return memory.block_data(block);
}

}  // namespace

void apply_kv_ops(std::span<const KvOp> ops, KvStore& memory, OffloadTier* tier) {
  const KvLayout& layout = memory.layout();
  const size_t block_bytes = layout.block_bytes();
  for (const KvOp& op : ops) {
    switch (op.kind) {
      case KvOp::Kind::kCopy:
        std::memcpy(block_of(memory, op.dst, op), block_of(memory, op.src, op), block_bytes);
        break;
      case KvOp::Kind::kCopySlots:
        if (op.slots < 0 || op.slots > layout.block_size) {
          fail(ErrorCode::kCorrupt, "KV op copy_slots: {} slots in a block of {}", op.slots,
               layout.block_size);
        }
        copy_kv_slots(layout, block_of(memory, op.src, op), block_of(memory, op.dst, op), op.slots);
        break;
      case KvOp::Kind::kOffload:
        if (tier == nullptr) {
          fail(ErrorCode::kUnsupported, "KV op offload: this memory has no offload tier");
        }
        tier->store(OffloadedBlockMeta{op.hash, op.parent, op.tokens},
                    std::span<const uint8_t>(block_of(memory, op.src, op), block_bytes));
        break;
      case KvOp::Kind::kRestore:
        if (tier == nullptr) {
          fail(ErrorCode::kUnsupported, "KV op restore: this memory has no offload tier");
        }
        if (!tier->load(op.hash, std::span<uint8_t>(block_of(memory, op.dst, op), block_bytes))) {
          fail(ErrorCode::kUnsupported,
               "KV op restore: block {:016x} is not in this offload tier (its memory diverged "
               "from the store that planned the step)",
               op.hash);
        }
        break;
      case KvOp::Kind::kForget:
        if (tier == nullptr) {
          fail(ErrorCode::kUnsupported, "KV op forget: this memory has no offload tier");
        }
        tier->forget(op.hash);
        break;
      case KvOp::Kind::kImport:
        if (op.bytes == nullptr || op.bytes->size() != block_bytes) {
          fail(ErrorCode::kCorrupt, "KV op import: {} bytes for a block of {}",
               op.bytes == nullptr ? 0 : op.bytes->size(), block_bytes);
        }
        std::memcpy(block_of(memory, op.dst, op), op.bytes->data(), block_bytes);
        break;
    }
  }
}

}  // namespace rapide
