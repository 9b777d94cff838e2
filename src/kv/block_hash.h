// Block hashes for automatic prefix caching (after vLLM v1's hash_block_tokens).
//
// A full block of `block_size` token ids is named by
//     hash = xxh3_64(parent hash, extra key, the block's token ids)
// where the parent is the hash of the block before it, and the first block's parent is the
// root key. Chaining makes a hash stand for the whole prefix up to and including its block,
// so two prompts share a block only if every token before it matches too. The extra key
// (and the root) carry the model identity and KV layout: K/V computed by another model,
// another block size or another element type must never match.
//
// Partial blocks have no hash: only full blocks are ever shared.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace rapide {

// Hash of one block of token ids, chained to the previous block's hash.
uint64_t hash_block_tokens(uint64_t parent_hash, uint64_t extra_key,
                           std::span<const int32_t> tokens);

// The parent hash of a sequence's first block, derived from the extra key so that chains
// of different models start apart.
uint64_t root_block_hash(uint64_t extra_key);

// A 64-bit key for arbitrary identity bytes (model description, layout).
uint64_t hash_bytes(std::string_view bytes);

// Appends to `hashes` the hashes of every full block of `tokens` not hashed yet
// (hashes.size() blocks already are). A sequence keeps its hashes and extends them as it
// grows, so each block is hashed once.
void extend_block_hashes(std::span<const int32_t> tokens, int block_size, uint64_t extra_key,
                         std::vector<uint64_t>& hashes);

}  // namespace rapide
