#include "distributed/follower_kv_store.h"

#include "kv/kv_op_executor.h"

namespace rapide {

void FollowerKvStore::apply(const PassMessage& message) {
  replica_.use_layout(message.layout);
  apply_kv_ops(message.kv_ops, replica_, nullptr);
  for (const auto& [seq, blocks] : message.block_tables) replica_.set_table(seq, blocks);
}

}  // namespace rapide
