// OffloadTier: the second level of the KV cache. Blocks the prefix cache evicts from the
// BlockPool land here instead of being dropped, and a later prefix hit loads them back,
// which costs a decompression or a file read instead of a forward pass over their tokens.
//
// Two levels, each LRU with a byte cap:
//   compressed RAM   (--kv-offload-ram)  blocks compressed with lz4 / zstd / none;
//   files            (--kv-offload-dir, --kv-offload-size)  one checksummed file per block
//                    (offload_file.h); RAM-level blocks that age out are demoted here.
// A block leaving the last level is dropped, and the drop listener tells the prefix cache.
//
// Files persist: a tier opened on a directory indexes the valid blocks already there for
// the same model identity and layout, so a restarted server keeps its prefix cache; files
// of other models are ignored (counted as foreign) and left alone. Every load is checked
// (checksums, identity, layout, hash); a corrupt block is counted, forgotten and reported
// as missing, never used.
//
// Not thread-safe: the engine thread owns it, like the BlockPool.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <list>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "kv/offload_codec.h"
#include "kv/offload_file.h"
#include "model/kv_store.h"

namespace rapide {

struct OffloadTierOptions {
  uint64_t ram_bytes = 0;   // compressed-RAM level capacity; 0 = no RAM level
  std::string dir;          // file level directory; empty = no file level
  uint64_t disk_bytes = 0;  // file level capacity (0 with a dir = 4 GiB)
  OffloadCodec codec = OffloadCodec::kLz4;
  bool enabled() const { return ram_bytes > 0 || !dir.empty(); }
};

struct OffloadStats {
  uint64_t stored_blocks = 0;   // blocks offloaded (RAM -> tier)
  uint64_t loaded_blocks = 0;   // blocks loaded back (tier -> RAM)
  uint64_t bytes_out = 0;       // raw KV bytes offloaded
  uint64_t bytes_in = 0;        // raw KV bytes loaded back
  uint64_t stored_bytes = 0;    // what bytes_out took after compression
  uint64_t demoted_blocks = 0;  // compressed RAM -> file
  uint64_t dropped_blocks = 0;  // left the tier for lack of room
  uint64_t corrupt_blocks = 0;  // failed a check; ignored, recomputed
  uint64_t foreign_blocks = 0;  // another model's or layout's files; ignored
  uint64_t write_errors = 0;
  uint64_t ram_blocks = 0, ram_used_bytes = 0;
  uint64_t disk_blocks = 0, disk_used_bytes = 0;
};

class OffloadTier {
 public:
  // Called when a block leaves the tier (dropped for room, or found corrupt).
  using DropListener = std::function<void(uint64_t hash)>;

  // `identity` names the model and KV layout every stored block is stamped with. Creates
  // the directory if needed and indexes the valid blocks found in it (see found()).
  OffloadTier(const OffloadTierOptions& options, const KvLayout& layout, uint64_t identity);
  OffloadTier(const OffloadTier&) = delete;
  OffloadTier& operator=(const OffloadTier&) = delete;

  const OffloadTierOptions& options() const { return options_; }
  bool contains(uint64_t hash) const { return entries_.count(hash) != 0; }
  size_t size() const { return entries_.size(); }

  // Keeps a copy of a block (raw block_bytes) under meta.hash. A block already present is
  // only refreshed in the LRU order (same hash, same content).
  void store(const OffloadedBlockMeta& meta, std::span<const uint8_t> raw);
  // Decodes the block into `out` (block_bytes long). False when absent or corrupt.
  bool load(uint64_t hash, std::span<uint8_t> out);
  // Pinned blocks are not dropped or demoted while a prefix hit is loading them.
  void pin(uint64_t hash) { pinned_.insert(hash); }
  void unpin_all() { pinned_.clear(); }

  // The blocks indexed from the directory at start-up, for the prefix cache's directory.
  const std::vector<OffloadedBlockMeta>& found() const { return found_; }
  void set_drop_listener(DropListener listener) { on_drop_ = std::move(listener); }
  OffloadStats stats() const;

 private:
  enum class Level { kRam, kDisk };
  struct Entry {
    Level level = Level::kRam;
    OffloadedBlockMeta meta;
    OffloadCodec codec = OffloadCodec::kNone;
    std::vector<uint8_t> stored;  // RAM level: the compressed block
    uint64_t raw_checksum = 0;
    uint64_t bytes = 0;  // what it takes in its level
    std::list<uint64_t>::iterator lru;
  };

  std::filesystem::path file_path(uint64_t hash) const;
  void scan_directory();
  // Frees room in a level for `bytes` more, demoting or dropping LRU blocks. False when
  // that is impossible (everything left is pinned, or the block exceeds the cap).
  bool make_room(Level level, uint64_t bytes);
  bool put_on_disk(uint64_t hash, Entry& entry);
  void insert(uint64_t hash, Entry entry);
  void erase(uint64_t hash, bool notify);
  std::list<uint64_t>& lru(Level level) { return level == Level::kRam ? ram_lru_ : disk_lru_; }

  OffloadTierOptions options_;
  KvLayout layout_;
  uint64_t identity_;
  std::unordered_map<uint64_t, Entry> entries_;
  std::list<uint64_t> ram_lru_, disk_lru_;  // least recently used first
  std::unordered_set<uint64_t> pinned_;
  std::vector<OffloadedBlockMeta> found_;
  DropListener on_drop_;
  OffloadStats stats_;
};

}  // namespace rapide
