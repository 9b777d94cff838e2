// The simplest KvStore: a fixed number of sequence slots, each reserving max_context
// positions up front (what most engines do without paging). Used by `rapide run`,
// perplexity and tests; the paged BlockPool in src/kv plugs in behind the same interface.
#pragma once

#include <vector>

#include "base/huge_pages.h"
#include "kv/kv_store.h"

namespace rapide {

class ContiguousKvStore final : public KvStore {
 public:
  // block_size only chunks the reservation (attention walks blocks either way).
  ContiguousKvStore(const ModelConfig& config, int n_sequences, int max_context,
                    KvType type = KvType::kF16, int block_size = 256);

  const KvLayout& layout() const override { return layout_; }
  std::span<const int32_t> block_table(int32_t seq_id) const override;
  uint8_t* block_data(int32_t block) override {
    return memory_.data() + static_cast<size_t>(block) * layout_.block_bytes();
  }
  int n_sequences() const { return n_sequences_; }
  int max_context() const { return blocks_per_sequence_ * layout_.block_size; }
  size_t memory_bytes() const { return memory_.size(); }

 private:
  KvLayout layout_;
  int n_sequences_;
  int blocks_per_sequence_;
  std::vector<int32_t> tables_;  // n_sequences x blocks_per_sequence
  LargeBuffer memory_;           // huge pages: attention reads runs far apart (base/huge_pages.h)
};

}  // namespace rapide
