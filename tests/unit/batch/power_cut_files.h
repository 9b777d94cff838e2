// A FileSyscalls double that does the real calls and keeps what a power cut would leave.
//
// The model of the disk: a write lands in the page cache only; fdatasync(fd) makes the file's
// bytes written so far durable; a file the writer creates exists after a power cut only once
// its directory was synced (sync_directory). power_cut() then makes the real files what the
// disk would hold: unsynced bytes dropped (or, to model a cache flushed part way, only the
// first `keep_unsynced` of them kept) and never-synced new files gone. Files that existed
// before a writer opened them count as durable up to their size at that moment.
//
// fail_after_writes(n) also lets the n-th write succeed and every call after it fail with
// EIO: the process "dies" there without running any more syncs.
#pragma once

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "batch/file_syscalls.h"

namespace rapide::batch {

class PowerCutFiles final : public FileSyscalls {
 public:
  struct Event {
    enum Kind { kOpen, kWrite, kSync, kSyncDirectory, kClose } kind;
    std::string path;
    uint64_t bytes = 0;  // written (kWrite), durable after it (kSync)
  };

  int open_append(const std::string& path) override {
    if (dead()) return -1;
    const bool existed = std::filesystem::exists(path);
    const int fd = real_file_syscalls().open_append(path);
    if (fd < 0) return fd;
    File& f = files_[canonical(path)];
    if (existed && !f.tracked) {
      f.written = f.durable = std::filesystem::file_size(path);
      f.entry_durable = true;
    }
    f.tracked = true;
    fds_[fd] = canonical(path);
    events_.push_back({Event::kOpen, canonical(path), 0});
    return fd;
  }
  ssize_t write(int fd, const void* data, size_t size) override {
    if (dead()) return -1;
    const ssize_t n = real_file_syscalls().write(fd, data, size);
    if (n > 0) {
      File& f = files_.at(fds_.at(fd));
      f.written += static_cast<uint64_t>(n);
      events_.push_back({Event::kWrite, fds_.at(fd), static_cast<uint64_t>(n)});
    }
    if (writes_left_ > 0 && --writes_left_ == 0) dead_ = true;
    return n;
  }
  int fdatasync(int fd) override {
    if (dead()) return -1;
    File& f = files_.at(fds_.at(fd));
    f.durable = f.written;
    events_.push_back({Event::kSync, fds_.at(fd), f.durable});
    return 0;  // the real fdatasync is not needed: power_cut() decides what survives
  }
  void sync_directory(const std::string& dir) override {
    if (dead()) return;
    const std::string d = canonical(dir);
    for (auto& [path, f] : files_) {
      if (std::filesystem::path(path).parent_path() == d) f.entry_durable = true;
    }
    events_.push_back({Event::kSyncDirectory, d, 0});
  }
  int close(int fd) override {
    // The descriptor is released even after the "death": the test process lives on.
    const std::string path = fds_.at(fd);
    fds_.erase(fd);
    if (!dead()) events_.push_back({Event::kClose, path, 0});
    return real_file_syscalls().close(fd);
  }

  // The n-th write from now is the last call that succeeds.
  void fail_after_writes(int n) { writes_left_ = n; }

  // Makes every file written through this double what a power cut now would leave on disk.
  void power_cut(uint64_t keep_unsynced = 0) {
    for (auto& [path, f] : files_) {
      if (!f.entry_durable) {
        std::filesystem::remove(path);
      } else {
        std::filesystem::resize_file(path, std::min(f.written, f.durable + keep_unsynced));
      }
    }
    files_.clear();
  }

  // Bytes of `path` that would survive a power cut now (0 for an unsynced new file).
  uint64_t durable_bytes(const std::string& path) const {
    const auto it = files_.find(canonical(path));
    if (it == files_.end() || !it->second.entry_durable) return 0;
    return it->second.durable;
  }
  const std::vector<Event>& events() const { return events_; }

 private:
  struct File {
    bool tracked = false;
    uint64_t written = 0;  // the file's size as the process sees it
    uint64_t durable = 0;  // its size on disk after a power cut
    bool entry_durable = false;
  };

  bool dead() {
    if (dead_) errno = EIO;
    return dead_;
  }
  static std::string canonical(const std::string& path) {
    return std::filesystem::weakly_canonical(std::filesystem::absolute(path)).string();
  }

  std::map<std::string, File> files_;  // by canonical path
  std::map<int, std::string> fds_;
  std::vector<Event> events_;
  int writes_left_ = 0;
  bool dead_ = false;
};

}  // namespace rapide::batch
