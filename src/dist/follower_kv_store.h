// A follower rank's KV shard: the block tables come from each published pass (the leader's
// scheduler owns allocation, sharing and freeing), the block memory is this rank's own,
// allocated the first time a block number appears. Block numbers are the leader's, so the
// leader's pool size bounds what a follower allocates.
#pragma once

#include <memory>
#include <unordered_map>
#include <vector>

#include "dist/step_wire.h"
#include "model/kv_store.h"

namespace rapide {

class FollowerKvStore : public KvStore {
 public:
  // Takes the layout (first pass) and the tables of `message`. Throws Error(kCorrupt) when a
  // later pass announces another layout, or a block number is negative.
  void apply(const PassMessage& message);

  const KvLayout& layout() const override { return layout_; }
  std::span<const int32_t> block_table(int32_t seq_id) const override;
  uint8_t* block_data(int32_t block) override;
  // Bytes of KV memory this rank holds (figures).
  size_t resident_bytes() const { return allocated_ * layout_.block_bytes(); }

 private:
  KvLayout layout_;
  bool has_layout_ = false;
  std::unordered_map<int32_t, std::vector<int32_t>> tables_;
  std::vector<std::unique_ptr<uint8_t[]>> blocks_;
  size_t allocated_ = 0;
};

}  // namespace rapide
