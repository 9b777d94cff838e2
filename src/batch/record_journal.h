// The output and error files as the batch's checkpoint journal.
//
// Nothing else records progress: a result is done exactly when its line is in one of the two
// files. Each record is one complete line written with a single append, and the files are
// fdatasync'ed at checkpoints, so after a kill (SIGKILL included) a file holds whole records
// plus at most one torn last line. A record is durable (survives a power cut, not just a
// kill) once a checkpoint after it returned: when the sync policy says so, on sync(), and
// on destruction; a new file's directory entry is synced when the writer creates it. On
// resume recover_records() cuts the file back to its last valid record and reports which
// input lines are done; those are skipped and everything else runs, so every input line
// ends up in exactly one of the files exactly once.
//
// Records name their input line through their id, "batch_req_<line>": the custom_id alone
// cannot tell a line that ran from a later line that repeats its custom_id (an error).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>

#include "base/clock.h"
#include "batch/file_syscalls.h"

namespace rapide::batch {

// "batch_req_<line>", the id of the record of input line `line`.
std::string record_id(uint64_t line);
// The input line of a record id, or nullopt when `id` is not of that form.
std::optional<uint64_t> line_of_record_id(const std::string& id);

// Input lines already answered: line -> the custom_id its record names (nullopt when the
// line had none, e.g. invalid JSON).
using DoneLines = std::unordered_map<uint64_t, std::optional<std::string>>;

struct Recovery {
  uint64_t records = 0;          // valid records found
  uint64_t truncated_bytes = 0;  // bytes cut from a torn or unreadable tail
};

// Reads the records of `path` (a missing file has none), truncates the file after its last
// valid, newline-terminated record, and adds each record's line to `done`. Throws
// Error(kCorrupt) when a record repeats a line already in `done`: the files do not come
// from one run of the same input.
Recovery recover_records(const std::string& path, DoneLines& done);

// Appends records to a file and makes them durable at checkpoints.
class RecordWriter {
 public:
  struct SyncPolicy {
    int every_records = 256;     // fdatasync after this many records...
    double every_seconds = 1.0;  // ...or when this long has passed since the last one
  };
  // Opens (creating if needed) for appending; throws Error(kUnavailable) on failure.
  // Every file call goes through `files` (tests observe syncing through it).
  RecordWriter(const std::string& path, SyncPolicy policy,
               FileSyscalls& files = real_file_syscalls());
  ~RecordWriter();  // syncs what is pending
  RecordWriter(const RecordWriter&) = delete;
  RecordWriter& operator=(const RecordWriter&) = delete;

  // Writes `record` plus a newline in one append, then syncs if a checkpoint is due.
  void append(const std::string& record);
  // Forces the checkpoint now.
  void sync();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  SyncPolicy policy_;
  FileSyscalls& files_;
  int fd_ = -1;
  int unsynced_ = 0;
  TimePoint last_sync_;
};

}  // namespace rapide::batch
