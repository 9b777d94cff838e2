#include "kv/offload_tier.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <xxhash.h>

#include <chrono>
#include <cstring>
#include <system_error>

#include "base/error.h"

namespace rapide {

namespace {
constexpr uint64_t kDefaultDiskBytes = 4ull << 30;

uint64_t now_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

// A file's header and tokens are small next to a block: the payload plus a margin.
uint64_t file_estimate(const std::vector<uint8_t>& stored, const OffloadedBlockMeta& meta) {
  return stored.size() + 256 + meta.tokens.size() * 4;
}
}  // namespace

OffloadTierOptions mirror_tier_options(const OffloadTierOptions& leader, int rank) {
  constexpr uint64_t kUnbounded = 1ull << 62;  // room for sums without overflow
  OffloadTierOptions mirror = leader;
  mirror.reuse_files = false;
  if (leader.dir.empty()) {
    mirror.ram_bytes = kUnbounded;
  } else {
    mirror.dir = (std::filesystem::path(leader.dir) / fmt::format("rank{}", rank)).string();
    mirror.disk_bytes = kUnbounded;
  }
  return mirror;
}

OffloadTier::OffloadTier(const OffloadTierOptions& options, const KvLayout& layout,
                         uint64_t identity)
    : options_(options), layout_(layout), identity_(identity) {
  if (!options_.dir.empty()) {
    if (options_.disk_bytes == 0) options_.disk_bytes = kDefaultDiskBytes;
    std::error_code ec;
    std::filesystem::create_directories(options_.dir, ec);
    if (ec) {
      fail(ErrorCode::kInvalidArgument, "cannot create the KV offload directory '{}': {}",
           options_.dir, ec.message());
    }
    scan_directory();
  }
  if (options_.background) worker_ = std::thread([this] { worker_loop(); });
}

OffloadTier::~OffloadTier() {
  if (!worker_.joinable()) return;
  {
    std::lock_guard<std::mutex> guard(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  worker_.join();  // after the queue is done: the files a restart reads are complete
}

std::filesystem::path OffloadTier::file_path(uint64_t hash) const {
  return std::filesystem::path(options_.dir) / block_file_name(identity_, hash);
}

void OffloadTier::scan_directory() {
  const std::string ours = fmt::format("{:016x}-", identity_);
  std::error_code ec;
  std::vector<FileWrite> none;
  for (const auto& item : std::filesystem::directory_iterator(options_.dir, ec)) {
    if (!item.is_regular_file() || !is_block_file_name(item.path())) continue;
    BlockFileInfo info;
    const BlockFileStatus status = read_block_file_header(item.path(), identity_, layout_, info);
    const bool named_ours = item.path().filename().string().rfind(ours, 0) == 0;
    if (status == BlockFileStatus::kForeign) {
      stats_.foreign_blocks++;
      continue;
    }
    if (status == BlockFileStatus::kOk && !options_.reuse_files) {
      std::filesystem::remove(item.path(), ec);
      continue;
    }
    if (status != BlockFileStatus::kOk || !named_ours ||
        item.path().filename() != block_file_name(identity_, info.meta.hash)) {
      stats_.corrupt_blocks++;
      if (named_ours) std::filesystem::remove(item.path(), ec);
      continue;
    }
    if (entries_.count(info.meta.hash) != 0 || !make_room(Level::kDisk, info.file_bytes, none)) {
      continue;
    }
    Entry e;
    e.level = Level::kDisk;
    e.meta = info.meta;
    e.bytes = info.file_bytes;
    e.generation = next_generation_++;
    found_.push_back(info.meta);
    insert(info.meta.hash, std::move(e));
  }
  if (!found_.empty() || stats_.foreign_blocks + stats_.corrupt_blocks > 0) {
    spdlog::info("kv offload: {} cached blocks found in {} ({} foreign, {} corrupt ignored)",
                 found_.size(), options_.dir, stats_.foreign_blocks, stats_.corrupt_blocks);
  }
}

bool OffloadTier::contains(uint64_t hash) const {
  std::lock_guard<std::mutex> guard(mu_);
  return entries_.count(hash) != 0 || pending_.count(hash) != 0;
}

size_t OffloadTier::size() const {
  std::lock_guard<std::mutex> guard(mu_);
  return entries_.size() + pending_.size();
}

void OffloadTier::forget(uint64_t hash) {
  Lock lock(mu_);
  // The worker reads a queued block's bytes without the lock: let it finish with it.
  done_cv_.wait(lock, [&] { return pending_.count(hash) == 0; });
  erase(hash, /*notify=*/false);
}

void OffloadTier::pin(uint64_t hash) {
  std::lock_guard<std::mutex> guard(mu_);
  pinned_.insert(hash);
}

void OffloadTier::unpin_all() {
  std::lock_guard<std::mutex> guard(mu_);
  pinned_.clear();
}

void OffloadTier::set_drop_listener(DropListener listener) {
  // Only the owner thread reads it (deliver_drops), so it needs no lock.
  on_drop_ = std::move(listener);
}

void OffloadTier::insert(uint64_t hash, Entry entry) {
  std::list<uint64_t>& list = lru(entry.level);
  (entry.level == Level::kRam ? stats_.ram_used_bytes : stats_.disk_used_bytes) += entry.bytes;
  list.push_back(hash);
  entry.lru = std::prev(list.end());
  entries_[hash] = std::move(entry);
}

void OffloadTier::dropped(uint64_t hash) {
  drops_.push_back(hash);
}

void OffloadTier::erase(uint64_t hash, bool notify) {
  auto it = entries_.find(hash);
  if (it == entries_.end()) return;
  Entry& e = it->second;
  lru(e.level).erase(e.lru);
  if (e.level == Level::kRam) {
    stats_.ram_used_bytes -= e.bytes;
  } else {
    stats_.disk_used_bytes -= e.bytes;
    // A block still being written has no file yet; the writer removes it when it finds the
    // entry gone (write_files).
    std::error_code ec;
    std::filesystem::remove(file_path(hash), ec);
  }
  entries_.erase(it);
  if (notify) dropped(hash);
}

bool OffloadTier::move_to_disk(uint64_t hash, Entry& entry, std::vector<FileWrite>& writes) {
  const uint64_t estimate = file_estimate(*entry.stored, entry.meta);
  if (options_.dir.empty() || !make_room(Level::kDisk, estimate, writes)) return false;
  entry.level = Level::kDisk;
  entry.writing = true;
  entry.bytes = estimate;
  writes.push_back(
      FileWrite{hash, entry.generation, entry.raw_checksum, entry.codec, entry.meta, entry.stored});
  return true;
}

bool OffloadTier::make_room(Level level, uint64_t bytes, std::vector<FileWrite>& writes) {
  const uint64_t cap = level == Level::kRam ? options_.ram_bytes : options_.disk_bytes;
  if (bytes > cap) return false;
  std::list<uint64_t>& list = lru(level);
  uint64_t& used = level == Level::kRam ? stats_.ram_used_bytes : stats_.disk_used_bytes;
  auto it = list.begin();
  while (used + bytes > cap) {
    while (it != list.end() && pinned_.count(*it) != 0) ++it;
    if (it == list.end()) return false;
    const uint64_t victim = *it++;
    if (level == Level::kRam && !options_.dir.empty()) {
      // Demote: the compressed bytes go to a file, the entry moves to the disk LRU.
      Entry moved = std::move(entries_[victim]);
      ram_lru_.erase(moved.lru);
      stats_.ram_used_bytes -= moved.bytes;
      entries_.erase(victim);
      if (move_to_disk(victim, moved, writes)) {
        stats_.demoted_blocks++;
        insert(victim, std::move(moved));
      } else {
        stats_.dropped_blocks++;
        dropped(victim);
      }
    } else {
      stats_.dropped_blocks++;
      erase(victim, /*notify=*/true);
    }
  }
  return true;
}

void OffloadTier::write_files(Lock& lock, std::vector<FileWrite>& writes) {
  if (writes.empty()) return;
  std::vector<uint64_t> written(writes.size());
  lock.unlock();
  for (size_t i = 0; i < writes.size(); ++i) {
    const FileWrite& w = writes[i];
    written[i] = write_block_file(file_path(w.hash), identity_, layout_, w.meta, w.codec, *w.stored,
                                  layout_.block_bytes(), w.raw_checksum);
  }
  lock.lock();
  for (size_t i = 0; i < writes.size(); ++i) {
    const FileWrite& w = writes[i];
    auto it = entries_.find(w.hash);
    if (it == entries_.end() || it->second.generation != w.generation) {
      // Dropped while it was written. A newer entry of the same hash on disk has the same
      // bytes and name, so its file stays; otherwise nothing may be left behind.
      const bool newer_on_disk = it != entries_.end() && it->second.level == Level::kDisk;
      std::error_code ec;
      if (written[i] > 0 && !newer_on_disk) std::filesystem::remove(file_path(w.hash), ec);
      continue;
    }
    if (written[i] == 0) {
      stats_.write_errors++;
      stats_.dropped_blocks++;
      erase(w.hash, /*notify=*/true);
      continue;
    }
    Entry& e = it->second;
    stats_.disk_used_bytes = stats_.disk_used_bytes - e.bytes + written[i];
    e.bytes = written[i];
    e.writing = false;
    e.stored.reset();
  }
}

void OffloadTier::process(Lock& lock, uint64_t hash) {
  const uint64_t start = now_ns();
  // The node stays put while the owner inserts others (unordered_map keeps references), and
  // nobody else erases it: the raw bytes are read here without the lock, as load() does.
  const Pending& p = pending_.at(hash);
  lock.unlock();
  Entry e;
  e.meta = p.meta;
  e.raw_checksum = XXH3_64bits(p.raw.data(), p.raw.size());
  auto stored = std::make_shared<std::vector<uint8_t>>();
  e.codec = compress_block(options_.codec, p.raw, *stored);
  e.stored = std::move(stored);
  lock.lock();
  e.generation = next_generation_++;
  stats_.stored_blocks++;
  stats_.bytes_out += p.raw.size();
  stats_.stored_bytes += e.stored->size();
  std::vector<FileWrite> writes;
  if (options_.ram_bytes > 0 && make_room(Level::kRam, e.stored->size(), writes)) {
    e.level = Level::kRam;
    e.bytes = e.stored->size();
    insert(hash, std::move(e));
  } else if (move_to_disk(hash, e, writes)) {
    insert(hash, std::move(e));
  } else {
    stats_.dropped_blocks++;
    dropped(hash);
  }
  pending_bytes_ -= p.raw.size();
  pending_.erase(hash);  // in the same critical section as the insert: contains() never blinks
  write_files(lock, writes);
  stats_.worker_ns += now_ns() - start;
}

void OffloadTier::worker_loop() {
  Lock lock(mu_);
  for (;;) {
    work_cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) break;  // stop_, with nothing left to store
    const uint64_t hash = queue_.front();
    queue_.pop_front();
    worker_busy_ = true;
    process(lock, hash);
    worker_busy_ = false;
    done_cv_.notify_all();
  }
}

void OffloadTier::store(const OffloadedBlockMeta& meta, std::span<const uint8_t> raw) {
  if (raw.size() != layout_.block_bytes()) {
    fail(ErrorCode::kInvalidArgument, "KV offload of {} bytes, but a block is {} bytes", raw.size(),
         layout_.block_bytes());
  }
  {
    Lock lock(mu_);
    if (auto it = entries_.find(meta.hash); it != entries_.end()) {
      std::list<uint64_t>& list = lru(it->second.level);
      list.splice(list.end(), list, it->second.lru);
    } else if (pending_.count(meta.hash) == 0) {
      if (options_.background && pending_bytes_ + raw.size() > options_.max_pending_bytes &&
          !queue_.empty()) {
        // The worker is behind: wait for room rather than hold unbounded copies.
        const uint64_t start = now_ns();
        done_cv_.wait(lock, [&] {
          return queue_.empty() || pending_bytes_ + raw.size() <= options_.max_pending_bytes;
        });
        stats_.store_waits++;
        stats_.store_wait_ns += now_ns() - start;
      }
      pending_.emplace(meta.hash, Pending{meta, std::vector<uint8_t>(raw.begin(), raw.end())});
      pending_bytes_ += raw.size();
      if (options_.background) {
        queue_.push_back(meta.hash);
        work_cv_.notify_one();
      } else {
        process(lock, meta.hash);
      }
    }
  }
  deliver_drops();
}

bool OffloadTier::load(uint64_t hash, std::span<uint8_t> out) {
  bool ok = false;
  {
    Lock lock(mu_);
    if (auto p = pending_.find(hash); p != pending_.end()) {
      // Still queued: its raw bytes are right here.
      if (out.size() != p->second.raw.size()) return false;
      std::memcpy(out.data(), p->second.raw.data(), out.size());
      stats_.loaded_blocks++;
      stats_.bytes_in += out.size();
      ok = true;
    } else if (auto it = entries_.find(hash); it != entries_.end()) {
      Entry& e = it->second;
      if (e.level == Level::kRam || e.writing) {
        ok = out.size() == layout_.block_bytes() && decompress_block(e.codec, *e.stored, out) &&
             XXH3_64bits(out.data(), out.size()) == e.raw_checksum;
        if (!ok) stats_.corrupt_blocks++;
      } else {
        const BlockFileStatus status =
            read_block_file(file_path(hash), identity_, layout_, hash, out);
        ok = status == BlockFileStatus::kOk;
        if (status == BlockFileStatus::kForeign) stats_.foreign_blocks++;
        if (status == BlockFileStatus::kCorrupt || status == BlockFileStatus::kMissing) {
          stats_.corrupt_blocks++;
        }
      }
      if (!ok) {
        spdlog::warn("kv offload: block {:016x} failed its checks; recomputing it instead", hash);
        erase(hash, /*notify=*/true);
      } else {
        std::list<uint64_t>& list = lru(e.level);
        list.splice(list.end(), list, e.lru);
        stats_.loaded_blocks++;
        stats_.bytes_in += out.size();
      }
    }
  }
  deliver_drops();
  return ok;
}

void OffloadTier::flush() {
  Lock lock(mu_);
  done_cv_.wait(lock, [&] { return queue_.empty() && !worker_busy_; });
}

void OffloadTier::deliver_drops() {
  std::vector<uint64_t> drops;
  {
    std::lock_guard<std::mutex> guard(mu_);
    drops.swap(drops_);
    // A hash stored again after its drop was recorded is in the tier now.
    std::erase_if(drops, [&](uint64_t h) { return entries_.count(h) + pending_.count(h) != 0; });
  }
  if (!on_drop_) return;
  for (uint64_t hash : drops) on_drop_(hash);
}

OffloadStats OffloadTier::stats() const {
  std::lock_guard<std::mutex> guard(mu_);
  OffloadStats s = stats_;
  s.ram_blocks = ram_lru_.size();
  s.disk_blocks = disk_lru_.size();
  s.pending_blocks = pending_.size();
  return s;
}

}  // namespace rapide
