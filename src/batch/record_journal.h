// The output and error files as the batch's checkpoint journal.
//
// Nothing else records progress: a result is done exactly when its line is in one of the two
// files. Each record is one complete line written with a single append, and the files are
// fdatasync'ed at checkpoints, so after a kill (SIGKILL included) a file holds whole records
// plus at most one torn last line (the newline is the commit point). A record is durable (survives
// a power cut, not just a kill) once a checkpoint after it returned: when the sync policy says so,
// on sync(), and on destruction; a new file's directory entry is synced when the writer creates it.
// On resume recover_records() cuts a torn tail (unreadable lines after the last valid record) and
// reports which requests are answered; those are skipped and everything else runs, so every request
// ends up in exactly one of the files exactly once. An unreadable line with valid records after it
// is no torn tail but damage (e.g. blocks lost in a power cut): it is reported and left in place,
// and the records after it count.
//
// A record names what it answers: its "custom_id" and, in its id "batch_req_<line>_<digest>",
// the input line and the FNV-1a 64 digest of that line's bytes (16 hex digits). Resume
// matches requests by custom_id (resume_plan.h); the digest tells whether the request was
// edited since, and line + digest identify a line that has no usable custom_id.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>

#include "base/clock.h"
#include "batch/file_syscalls.h"

namespace rapide::batch {

// Which request a record answers.
struct RecordKey {
  uint64_t line = 0;                     // 1-based input line, when it was written
  std::optional<uint64_t> digest;        // of that line; absent in "batch_req_<line>" ids
  std::optional<std::string> custom_id;  // absent when the line had no usable one
};

// "batch_req_<line>_<digest as 16 hex digits>", the id of a record of that input line.
std::string record_id(uint64_t line, uint64_t digest);
// The line and digest of a record id, or nullopt when `id` is not of that form. The
// digest-less "batch_req_<line>" of earlier versions is read too (digest absent).
std::optional<RecordKey> parse_record_id(const std::string& id);

// The requests answered by earlier runs, as resume looks them up.
struct AnsweredRequests {
  std::unordered_map<std::string, RecordKey> by_custom_id;
  std::unordered_map<uint64_t, RecordKey> by_line;  // records without a custom_id
  size_t size() const { return by_custom_id.size() + by_line.size(); }
};

struct Recovery {
  uint64_t records = 0;          // valid records found
  uint64_t truncated_bytes = 0;  // bytes cut from a torn or unreadable tail
  uint64_t corrupt_lines = 0;    // unreadable lines followed by valid records (left as is)
};

// Reads the records of `path` (a missing file has none), truncates the file after its last
// valid, newline-terminated record, and adds each record to `answered`. Throws
// Error(kCorrupt) when a record answers a custom_id (or a line without one) already in
// `answered`: the files do not come from runs of one batch.
Recovery recover_records(const std::string& path, AnsweredRequests& answered);

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
