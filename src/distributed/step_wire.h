// One forward pass as the leader publishes it to tensor-parallel followers: the flat batch,
// the block table of every sequence in it, the KV layout the blocks are cut to, and the
// block copies the step made before the pass (its plan's kv_ops: copy-on-write, partial
// prefix hits), encoded as one array of int32 (what MPI_Bcast sends). Plain data: decoding
// needs no state.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "kv/kv_store.h"
#include "model/batch.h"
#include "model/kv_ops.h"

namespace rapide {

struct PassMessage {
  bool hidden_only = false;  // forward_hidden (embeddings) rather than forward
  KvLayout layout;
  Batch batch;
  // (sequence id, its blocks in position order) for each sequence of the batch, once.
  std::vector<std::pair<int32_t, std::vector<int32_t>>> block_tables;
  // Copies and partial copies, in order, run before the pass (kv/kv_op_executor.h).
  std::vector<KvOp> kv_ops;
};

// The leader's side: `kv` supplies the tables of the batch's sequences.
PassMessage make_pass_message(const Batch& batch, const KvStore& kv, bool hidden_only);

// Throws Error(kUnsupported) for a KV op other than a copy (offload, restore and import move
// bytes that only the leader's memory has).
std::vector<int32_t> encode_pass(const PassMessage& message);
// Throws Error(kCorrupt) for an array that is not an encoded pass.
PassMessage decode_pass(std::span<const int32_t> words);

}  // namespace rapide
