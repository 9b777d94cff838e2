#include "kv/replica_kv_store.h"

#include "base/error.h"

namespace rapide {

namespace {
bool same_layout(const KvLayout& a, const KvLayout& b) {
  return a.n_layers == b.n_layers && a.n_kv_heads == b.n_kv_heads && a.head_dim == b.head_dim &&
         a.block_size == b.block_size && a.type == b.type;
}
}  // namespace

void ReplicaKvStore::use_layout(const KvLayout& layout) {
  if (!has_layout_) {
    layout_ = layout;
    has_layout_ = true;
  } else if (!same_layout(layout_, layout)) {
    fail(ErrorCode::kCorrupt, "KV replica: the KV layout changed between passes");
  }
}

void ReplicaKvStore::set_table(int32_t seq_id, std::span<const int32_t> blocks) {
  for (int32_t b : blocks) {
    if (b == kFreedBlock) continue;
    if (b < 0) fail(ErrorCode::kCorrupt, "KV replica: block number {}", b);
    block_data(b);
  }
  tables_[seq_id].assign(blocks.begin(), blocks.end());
}

std::span<const int32_t> ReplicaKvStore::block_table(int32_t seq_id) const {
  auto it = tables_.find(seq_id);
  if (it == tables_.end()) return {};
  return it->second;
}

uint8_t* ReplicaKvStore::block_data(int32_t block) {
  if (block < 0) fail(ErrorCode::kCorrupt, "KV replica: block number {}", block);
  const size_t b = static_cast<size_t>(block);
  if (b >= blocks_.size()) blocks_.resize(b + 1);
  if (blocks_[b] == nullptr) {
    // Value-initialised (zeros): attention never reads a slot before the pass that writes it.
    blocks_[b] = std::make_unique<uint8_t[]>(layout_.block_bytes());
    ++allocated_;
  }
  return blocks_[b].get();
}

}  // namespace rapide
