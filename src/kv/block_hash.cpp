#include "kv/block_hash.h"

#include <xxhash.h>

#include <cstring>

namespace rapide {

uint64_t hash_block_tokens(uint64_t parent_hash, uint64_t extra_key,
                           std::span<const int32_t> tokens) {
  // One contiguous buffer keeps this a single XXH3 call; blocks are small (16 tokens).
  uint8_t stack[2 * sizeof(uint64_t) + 64 * sizeof(int32_t)];
  std::vector<uint8_t> heap;
  const size_t n = 2 * sizeof(uint64_t) + tokens.size_bytes();
  uint8_t* buf = stack;
  if (n > sizeof(stack)) {
    heap.resize(n);
    buf = heap.data();
  }
  std::memcpy(buf, &parent_hash, sizeof(parent_hash));
  std::memcpy(buf + sizeof(uint64_t), &extra_key, sizeof(extra_key));
  if (!tokens.empty()) std::memcpy(buf + 2 * sizeof(uint64_t), tokens.data(), tokens.size_bytes());
  return XXH3_64bits(buf, n);
}

uint64_t root_block_hash(uint64_t extra_key) {
  static constexpr char kRootTag[] = "rapide prefix cache root";
  return XXH3_64bits_withSeed(kRootTag, sizeof(kRootTag) - 1, extra_key);
}

uint64_t hash_bytes(std::string_view bytes) {
  return XXH3_64bits(bytes.data(), bytes.size());
}

void extend_block_hashes(std::span<const int32_t> tokens, int block_size, uint64_t extra_key,
                         std::vector<uint64_t>& hashes) {
  const size_t full = tokens.size() / static_cast<size_t>(block_size);
  uint64_t parent = hashes.empty() ? root_block_hash(extra_key) : hashes.back();
  for (size_t b = hashes.size(); b < full; ++b) {
    parent = hash_block_tokens(parent, extra_key,
                               tokens.subspan(b * block_size, static_cast<size_t>(block_size)));
    hashes.push_back(parent);
  }
}

}  // namespace rapide
