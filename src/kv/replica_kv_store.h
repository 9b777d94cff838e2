// ReplicaKvStore: a KV store whose block tables are given and whose block memory is its own.
//
// The scheduler's store (paged_kv_store.h) decides which blocks a sequence holds; a replica
// only holds bytes. It is what runs a step somewhere else: a tensor- or pipeline-parallel
// follower (its shard of every block, tables from each published pass), or a replay of
// recorded plans (tables from the plan, kv_ops applied with kv_op_executor.h). Block numbers
// are the scheduler's; a block's memory is allocated the first time its number appears, so
// the scheduler's pool size bounds what a replica holds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "kv/kv_store.h"

namespace rapide {

class ReplicaKvStore final : public KvStore {
 public:
  ReplicaKvStore() = default;
  explicit ReplicaKvStore(const KvLayout& layout) { use_layout(layout); }

  // The first call sets the layout; a later call with another one throws Error(kCorrupt)
  // (every pass of one job, every plan of one recording, has the same).
  void use_layout(const KvLayout& layout);
  // The sequence's blocks in position order (kFreedBlock entries allowed), replacing what it
  // had; their memory is allocated now, not inside the threads of a forward pass. Throws
  // Error(kCorrupt) for another negative block number.
  void set_table(int32_t seq_id, std::span<const int32_t> blocks);
  void forget(int32_t seq_id) { tables_.erase(seq_id); }

  const KvLayout& layout() const override { return layout_; }
  std::span<const int32_t> block_table(int32_t seq_id) const override;
  uint8_t* block_data(int32_t block) override;
  // Bytes of KV memory this replica holds (figures).
  size_t resident_bytes() const { return allocated_ * layout_.block_bytes(); }

 private:
  KvLayout layout_;
  bool has_layout_ = false;
  std::unordered_map<int32_t, std::vector<int32_t>> tables_;
  std::vector<std::unique_ptr<uint8_t[]>> blocks_;
  size_t allocated_ = 0;
};

}  // namespace rapide
