// A follower rank's KV shard: the block tables come from each published pass (the leader's
// scheduler owns allocation, sharing and freeing), the block memory is this rank's own
// (kv/replica_kv_store.h), and the block copies the leader's step made before the pass
// (copy-on-write, partial prefix hits) are repeated on it first, so a prefix hit reads the
// same K/V on every rank.
#pragma once

#include "distributed/step_wire.h"
#include "kv/replica_kv_store.h"

namespace rapide {

class FollowerKvStore : public KvStore {
 public:
  // Takes the layout (first pass), runs the pass's KV ops, then takes its tables. Throws
  // Error(kCorrupt) when a later pass announces another layout, or a block number is
  // negative.
  void apply(const PassMessage& message);

  const KvLayout& layout() const override { return replica_.layout(); }
  std::span<const int32_t> block_table(int32_t seq_id) const override {
    return replica_.block_table(seq_id);
  }
  uint8_t* block_data(int32_t block) override { return replica_.block_data(block); }
  size_t resident_bytes() const { return replica_.resident_bytes(); }

 private:
  ReplicaKvStore replica_;
};

}  // namespace rapide
