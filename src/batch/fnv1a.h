// FNV-1a 64, the one hash of the batch files: the input's checksum in a journal's sidecar,
// the digest of an input line in its record's id, and the spread of a custom_id before
// the seed mix (batch_seed.h). Offset basis 0xcbf29ce484222325, prime 0x100000001b3; hashing
// in pieces continues from the previous value.
#pragma once

#include <cstdint>
#include <string_view>

namespace rapide::batch {

constexpr uint64_t kFnv1aOffset = 0xcbf29ce484222325ull;

inline uint64_t fnv1a64(std::string_view bytes, uint64_t h = kFnv1aOffset) {
  for (const char c : bytes) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace rapide::batch
