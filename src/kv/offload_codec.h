// Compression of offloaded KV blocks. F16 K/V compresses modestly (exponent bytes repeat),
// so the codec is a switch: lz4 is fast enough to sit on the eviction path, zstd saves more
// memory for a little more time, none just copies.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace rapide {

enum class OffloadCodec : uint32_t { kNone = 0, kLz4 = 1, kZstd = 2 };

OffloadCodec parse_offload_codec(const std::string& text);  // "none" | "lz4" | "zstd"
const char* offload_codec_name(OffloadCodec codec);

// The most bytes a block of `raw_bytes` is ever stored as: compress_block() falls back to
// the raw bytes when compression would not pay. A stored size above it is corruption, and
// nothing larger is ever allocated for one block.
constexpr uint64_t max_stored_bytes(uint64_t raw_bytes) {
  return raw_bytes;
}

// Compresses `raw` with `codec`. When compression does not pay (the output would not be
// smaller), stores the bytes as they are and returns kNone, so loads never expand data.
OffloadCodec compress_block(OffloadCodec codec, std::span<const uint8_t> raw,
                            std::vector<uint8_t>& out);

// Decompresses into `out`, which must be exactly the original size. Returns false when
// the data does not decode to exactly that many bytes (corruption), never throws for it.
bool decompress_block(OffloadCodec codec, std::span<const uint8_t> stored, std::span<uint8_t> out);

}  // namespace rapide
