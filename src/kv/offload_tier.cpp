#include "kv/offload_tier.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <xxhash.h>

#include <system_error>

#include "base/error.h"

namespace rapide {

namespace {
constexpr uint64_t kDefaultDiskBytes = 4ull << 30;
}  // namespace

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
}

std::filesystem::path OffloadTier::file_path(uint64_t hash) const {
  return std::filesystem::path(options_.dir) / block_file_name(identity_, hash);
}

void OffloadTier::scan_directory() {
  const std::string ours = fmt::format("{:016x}-", identity_);
  std::error_code ec;
  for (const auto& item : std::filesystem::directory_iterator(options_.dir, ec)) {
    if (!item.is_regular_file() || !is_block_file_name(item.path())) continue;
    BlockFileInfo info;
    const BlockFileStatus status = read_block_file_header(item.path(), identity_, layout_, info);
    const bool named_ours = item.path().filename().string().rfind(ours, 0) == 0;
    if (status == BlockFileStatus::kForeign) {
      stats_.foreign_blocks++;
      continue;
    }
    if (status != BlockFileStatus::kOk || !named_ours ||
        item.path().filename() != block_file_name(identity_, info.meta.hash)) {
      stats_.corrupt_blocks++;
      if (named_ours) std::filesystem::remove(item.path(), ec);
      continue;
    }
    if (contains(info.meta.hash) || !make_room(Level::kDisk, info.file_bytes)) continue;
    Entry e;
    e.level = Level::kDisk;
    e.meta = info.meta;
    e.bytes = info.file_bytes;
    found_.push_back(info.meta);
    insert(info.meta.hash, std::move(e));
  }
  if (!found_.empty() || stats_.foreign_blocks + stats_.corrupt_blocks > 0) {
    spdlog::info("kv offload: {} cached blocks found in {} ({} foreign, {} corrupt ignored)",
                 found_.size(), options_.dir, stats_.foreign_blocks, stats_.corrupt_blocks);
  }
}

void OffloadTier::insert(uint64_t hash, Entry entry) {
  std::list<uint64_t>& list = lru(entry.level);
  (entry.level == Level::kRam ? stats_.ram_used_bytes : stats_.disk_used_bytes) += entry.bytes;
  list.push_back(hash);
  entry.lru = std::prev(list.end());
  entries_[hash] = std::move(entry);
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
    std::error_code ec;
    std::filesystem::remove(file_path(hash), ec);
  }
  entries_.erase(it);
  if (notify && on_drop_) on_drop_(hash);
}

bool OffloadTier::put_on_disk(uint64_t hash, Entry& entry) {
  // Header and tokens are small next to a block; make room for the payload plus a margin.
  const uint64_t estimate = entry.stored.size() + 256 + entry.meta.tokens.size() * 4;
  if (options_.dir.empty() || !make_room(Level::kDisk, estimate)) return false;
  const uint64_t bytes =
      write_block_file(file_path(hash), identity_, layout_, entry.meta, entry.codec, entry.stored,
                       layout_.block_bytes(), entry.raw_checksum);
  if (bytes == 0) {
    stats_.write_errors++;
    return false;
  }
  entry.level = Level::kDisk;
  entry.bytes = bytes;
  entry.stored.clear();
  entry.stored.shrink_to_fit();
  return true;
}

bool OffloadTier::make_room(Level level, uint64_t bytes) {
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
      if (put_on_disk(victim, moved)) {
        stats_.demoted_blocks++;
        insert(victim, std::move(moved));
      } else {
        stats_.dropped_blocks++;
        if (on_drop_) on_drop_(victim);
      }
    } else {
      stats_.dropped_blocks++;
      erase(victim, /*notify=*/true);
    }
  }
  return true;
}

void OffloadTier::store(const OffloadedBlockMeta& meta, std::span<const uint8_t> raw) {
  if (raw.size() != layout_.block_bytes()) {
    fail(ErrorCode::kInvalidArgument, "KV offload of {} bytes, but a block is {} bytes", raw.size(),
         layout_.block_bytes());
  }
  if (auto it = entries_.find(meta.hash); it != entries_.end()) {
    std::list<uint64_t>& list = lru(it->second.level);
    list.splice(list.end(), list, it->second.lru);
    return;
  }
  Entry e;
  e.meta = meta;
  e.raw_checksum = XXH3_64bits(raw.data(), raw.size());
  e.codec = compress_block(options_.codec, raw, e.stored);
  stats_.stored_blocks++;
  stats_.bytes_out += raw.size();
  stats_.stored_bytes += e.stored.size();
  if (options_.ram_bytes > 0 && make_room(Level::kRam, e.stored.size())) {
    e.level = Level::kRam;
    e.bytes = e.stored.size();
    insert(meta.hash, std::move(e));
  } else if (put_on_disk(meta.hash, e)) {
    insert(meta.hash, std::move(e));
  } else {
    stats_.dropped_blocks++;
    if (on_drop_) on_drop_(meta.hash);
  }
}

bool OffloadTier::load(uint64_t hash, std::span<uint8_t> out) {
  auto it = entries_.find(hash);
  if (it == entries_.end()) return false;
  Entry& e = it->second;
  bool ok = false;
  if (e.level == Level::kRam) {
    ok = out.size() == layout_.block_bytes() && decompress_block(e.codec, e.stored, out) &&
         XXH3_64bits(out.data(), out.size()) == e.raw_checksum;
    if (!ok) stats_.corrupt_blocks++;
  } else {
    const BlockFileStatus status = read_block_file(file_path(hash), identity_, layout_, hash, out);
    ok = status == BlockFileStatus::kOk;
    if (status == BlockFileStatus::kForeign) stats_.foreign_blocks++;
    if (status == BlockFileStatus::kCorrupt || status == BlockFileStatus::kMissing) {
      stats_.corrupt_blocks++;
    }
  }
  if (!ok) {
    spdlog::warn("kv offload: block {:016x} failed its checks; recomputing it instead", hash);
    erase(hash, /*notify=*/true);
    return false;
  }
  std::list<uint64_t>& list = lru(e.level);
  list.splice(list.end(), list, e.lru);
  stats_.loaded_blocks++;
  stats_.bytes_in += out.size();
  return true;
}

OffloadStats OffloadTier::stats() const {
  OffloadStats s = stats_;
  s.ram_blocks = ram_lru_.size();
  s.disk_blocks = disk_lru_.size();
  return s;
}

}  // namespace rapide
