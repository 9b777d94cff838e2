#include "model/contiguous_kv_store.h"

#include <cstring>

#include "base/error.h"
#include "kernels/kv_rows.h"

namespace rapide {

ContiguousKvStore::ContiguousKvStore(const ModelConfig& config, int n_sequences, int max_context,
                                     KvType type, int block_size)
    : n_sequences_(n_sequences) {
  if (n_sequences < 1 || max_context < 1 || block_size < 1) {
    fail(ErrorCode::kInvalidArgument, "KV store needs >= 1 sequence, context and block size");
  }
  if (block_size > max_context) block_size = max_context;
  layout_ = KvLayout::for_model(config, block_size, type);
  check_kv_layout(layout_);
  blocks_per_sequence_ = (max_context + block_size - 1) / block_size;
  const size_t blocks = static_cast<size_t>(n_sequences) * blocks_per_sequence_;
  tables_.resize(blocks);
  for (size_t i = 0; i < blocks; ++i) tables_[i] = static_cast<int32_t>(i);
  memory_.resize(blocks * layout_.block_bytes());
  std::memset(memory_.data(), 0, memory_.size());
}

std::span<const int32_t> ContiguousKvStore::block_table(int32_t seq_id) const {
  if (seq_id < 0 || seq_id >= n_sequences_) {
    fail(ErrorCode::kOutOfRange, "sequence id {} outside the KV store's {} slots", seq_id,
         n_sequences_);
  }
  return {tables_.data() + static_cast<size_t>(seq_id) * blocks_per_sequence_,
          static_cast<size_t>(blocks_per_sequence_)};
}

}  // namespace rapide
