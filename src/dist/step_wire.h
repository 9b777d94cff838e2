// One forward pass as the leader publishes it to tensor-parallel followers: the flat batch,
// the block table of every sequence in it, and the KV layout the blocks are cut to, encoded
// as one array of int32 (what MPI_Bcast sends). Plain data: decoding needs no state.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "model/batch.h"
#include "model/kv_store.h"

namespace rapide {

struct PassMessage {
  bool hidden_only = false;  // forward_hidden (embeddings) rather than forward
  KvLayout layout;
  Batch batch;
  // (sequence id, its blocks in position order) for each sequence of the batch, once.
  std::vector<std::pair<int32_t, std::vector<int32_t>>> block_tables;
};

// The leader's side: `kv` supplies the tables of the batch's sequences.
PassMessage make_pass_message(const Batch& batch, const KvStore& kv, bool hidden_only);

std::vector<int32_t> encode_pass(const PassMessage& message);
// Throws Error(kCorrupt) for an array that is not an encoded pass.
PassMessage decode_pass(std::span<const int32_t> words);

}  // namespace rapide
