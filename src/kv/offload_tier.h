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
// Off the step's critical path (options.background, the engine's setting): store() copies the
// block's raw bytes into a bounded queue and returns; a worker thread checksums, compresses
// and writes files. A queued block is already in the tier (contains(), load() reads its raw
// copy), and a block being written to a file is loaded from its compressed bytes, so a
// lookup never waits for the worker. Blocks the worker drops are reported to the drop
// listener on the owner's thread only: at the next store(), load() or deliver_drops(). When
// the queue holds max_pending_bytes, store() waits (back-pressure, counted in stats). The
// destructor finishes the queue, so files written for a restart are complete. Without
// background, store() does the same work inline: one code path, two drivers.
//
// One owner thread (the engine's) calls the public methods; the worker shares the state
// under one mutex, and file writes and compression run outside it.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "kv/kv_store.h"
#include "kv/offload_codec.h"
#include "kv/offload_file.h"

namespace rapide {

struct OffloadTierOptions {
  uint64_t ram_bytes = 0;   // compressed-RAM level capacity; 0 = no RAM level
  std::string dir;          // file level directory; empty = no file level
  uint64_t disk_bytes = 0;  // file level capacity (0 with a dir = 4 GiB)
  OffloadCodec codec = OffloadCodec::kLz4;
  // Compress and write on a worker thread (see above); the engine turns it on.
  bool background = false;
  // Raw bytes queued for the worker before store() waits for it.
  uint64_t max_pending_bytes = 64ull << 20;
  // Index this model's block files already in `dir` at start-up (a restart keeps its prefix
  // cache). False removes them instead: tiers that must hold the same blocks as another
  // process's (tensor/pipeline ranks) start empty, since a kill between two ranks' writes
  // would leave one rank a block the other lacks.
  bool reuse_files = true;
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
  uint64_t pending_blocks = 0;  // queued for the worker (background)
  uint64_t store_waits = 0;     // store() calls that waited for room in the queue
  uint64_t store_wait_ns = 0;   // ... and how long, in total
  uint64_t worker_ns = 0;       // time the worker spent compressing and writing
};

// The tier of a rank that repeats `leader`'s through the plans' ops (a tensor/pipeline
// follower, rank `rank`): the same codec and RAM level, its files in <dir>/rank<rank>, and
// no capacity of its own beyond those: kForget ops drop what the leader's tier drops, so it
// holds the leader's blocks (its shard of each) and never lets go of one the leader may
// still restore, whatever each rank's compression ratio. A leader without files gets a
// mirror whose RAM level is unbounded for the same reason.
OffloadTierOptions mirror_tier_options(const OffloadTierOptions& leader, int rank);

class OffloadTier {
 public:
  // Called when a block leaves the tier (dropped for room, or found corrupt).
  using DropListener = std::function<void(uint64_t hash)>;

  // `identity` names the model and KV layout every stored block is stamped with. Creates
  // the directory if needed and indexes the valid blocks found in it (see found()).
  OffloadTier(const OffloadTierOptions& options, const KvLayout& layout, uint64_t identity);
  OffloadTier(const OffloadTier&) = delete;
  OffloadTier& operator=(const OffloadTier&) = delete;
  ~OffloadTier();

  const OffloadTierOptions& options() const { return options_; }
  // Stored or queued for storing.
  bool contains(uint64_t hash) const;
  size_t size() const;

  // Keeps a copy of a block (raw block_bytes) under meta.hash. A block already present is
  // only refreshed in the LRU order (same hash, same content).
  void store(const OffloadedBlockMeta& meta, std::span<const uint8_t> raw);
  // Decodes the block into `out` (block_bytes long). False when absent or corrupt.
  bool load(uint64_t hash, std::span<uint8_t> out);
  // Drops a block (its file too) without telling the drop listener: another tier's drop,
  // repeated by a tier that mirrors it (KvOp::kForget). A block still queued for the
  // worker is waited for first. Absent: nothing happens.
  void forget(uint64_t hash);
  // Pinned blocks are not dropped or demoted while a prefix hit is loading them.
  void pin(uint64_t hash);
  void unpin_all();

  // Waits until the worker has stored every queued block (tests, shutdown, benchmarks).
  void flush();
  // Reports the blocks the worker dropped to the drop listener, on the caller's thread.
  void deliver_drops();

  // The blocks indexed from the directory at start-up, for the prefix cache's directory.
  const std::vector<OffloadedBlockMeta>& found() const { return found_; }
  void set_drop_listener(DropListener listener);
  OffloadStats stats() const;

 private:
  enum class Level { kRam, kDisk };
  struct Entry {
    Level level = Level::kRam;
    OffloadedBlockMeta meta;
    OffloadCodec codec = OffloadCodec::kNone;
    // RAM level: the compressed block. Disk level: kept until the file is written (shared
    // with that write, which runs without the lock).
    std::shared_ptr<const std::vector<uint8_t>> stored;
    bool writing = false;  // disk level, its file not written yet
    uint64_t generation = 0;
    uint64_t raw_checksum = 0;
    uint64_t bytes = 0;  // what it takes in its level
    std::list<uint64_t>::iterator lru;
  };
  // A block store() queued: its raw bytes, until the worker has compressed them.
  struct Pending {
    OffloadedBlockMeta meta;
    std::vector<uint8_t> raw;
  };
  // A file the worker writes outside the lock.
  struct FileWrite {
    uint64_t hash = 0, generation = 0, raw_checksum = 0;
    OffloadCodec codec = OffloadCodec::kNone;
    OffloadedBlockMeta meta;
    std::shared_ptr<const std::vector<uint8_t>> stored;
  };
  using Lock = std::unique_lock<std::mutex>;

  std::filesystem::path file_path(uint64_t hash) const;
  void scan_directory();
  // Compresses one queued block (no lock held), then enters it into a level and writes the
  // files that decision needs. `lock` is held on entry and on return.
  void process(Lock& lock, uint64_t hash);
  // Frees room in a level for `bytes` more, demoting or dropping LRU blocks; demotions to
  // write are added to `writes`. False when that is impossible (everything left is pinned,
  // or the block exceeds the cap).
  bool make_room(Level level, uint64_t bytes, std::vector<FileWrite>& writes);
  // Moves an entry to the disk level, its file to be written (appended to `writes`).
  bool move_to_disk(uint64_t hash, Entry& entry, std::vector<FileWrite>& writes);
  // Writes the files with the lock released, then records each outcome.
  void write_files(Lock& lock, std::vector<FileWrite>& writes);
  void insert(uint64_t hash, Entry entry);
  void erase(uint64_t hash, bool notify);
  void dropped(uint64_t hash);
  void worker_loop();
  std::list<uint64_t>& lru(Level level) { return level == Level::kRam ? ram_lru_ : disk_lru_; }

  OffloadTierOptions options_;
  KvLayout layout_;
  uint64_t identity_;
  mutable std::mutex mu_;
  std::condition_variable work_cv_;  // the worker waits for queued blocks
  std::condition_variable done_cv_;  // store() and flush() wait for the worker
  std::unordered_map<uint64_t, Entry> entries_;
  std::list<uint64_t> ram_lru_, disk_lru_;  // least recently used first
  std::unordered_set<uint64_t> pinned_;
  std::unordered_map<uint64_t, Pending> pending_;
  std::deque<uint64_t> queue_;
  uint64_t pending_bytes_ = 0;
  bool worker_busy_ = false;
  bool stop_ = false;
  uint64_t next_generation_ = 1;
  std::vector<uint64_t> drops_;  // dropped, not yet reported to the listener
  std::vector<OffloadedBlockMeta> found_;
  DropListener on_drop_;
  OffloadStats stats_;
  std::thread worker_;
};

}  // namespace rapide
