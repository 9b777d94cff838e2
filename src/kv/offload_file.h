// One offloaded KV block as a file: a header that names it (block hash, parent hash, token
// ids), stamps where it came from (model identity and KV layout) and checksums everything
// (xxh3), then the block bytes as compressed by the tier's codec.
//
// A file is only ever used after every check passes: a corrupt one (bad magic, checksum,
// size, undecodable payload) or a foreign one (another model or layout) is reported as
// such and the caller recomputes instead. Only regular files are opened, never blocking
// (base/regular_file.h): a FIFO or device in their place is a corrupt block. Files are written to a
// temporary name and renamed, so a reader never sees half a block.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "kv/kv_store.h"
#include "kv/offload_codec.h"

namespace rapide {

// What names an offloaded block besides its bytes: enough to rebuild the prefix cache's
// directory entry (the chain link and the tokens, used to verify matches and explain
// misses).
struct OffloadedBlockMeta {
  uint64_t hash = 0;
  uint64_t parent = 0;
  std::vector<int32_t> tokens;
};

enum class BlockFileStatus { kOk, kMissing, kCorrupt, kForeign };

// What the header of a valid file says.
struct BlockFileInfo {
  OffloadedBlockMeta meta;
  uint64_t file_bytes = 0;
};

// "<identity>-<hash>.kvblock" in hex: one model's files are recognisable by name.
std::string block_file_name(uint64_t identity, uint64_t hash);
bool is_block_file_name(const std::filesystem::path& path);

// Writes `stored` (the codec's output for a block of raw_bytes whose xxh3 is raw_checksum).
// Returns the file size, or 0 on an I/O error (the block is then simply not offloaded).
uint64_t write_block_file(const std::filesystem::path& path, uint64_t identity,
                          const KvLayout& layout, const OffloadedBlockMeta& meta,
                          OffloadCodec codec, std::span<const uint8_t> stored, uint64_t raw_bytes,
                          uint64_t raw_checksum);

// Validates the header only (directory scan at start-up).
BlockFileStatus read_block_file_header(const std::filesystem::path& path, uint64_t identity,
                                       const KvLayout& layout, BlockFileInfo& info);

// Validates the whole file and decodes the block of hash `expected_hash` into `out`
// (layout.block_bytes() long). `out` is unspecified unless kOk is returned.
BlockFileStatus read_block_file(const std::filesystem::path& path, uint64_t identity,
                                const KvLayout& layout, uint64_t expected_hash,
                                std::span<uint8_t> out);

}  // namespace rapide
