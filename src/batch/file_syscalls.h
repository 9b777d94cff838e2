// The few file system calls the batch journal (record_journal.h) makes, behind an interface.
//
// What a record's durability rests on, a write followed by fdatasync before the record
// counts as answered, cannot be seen from outside the process: a SIGKILL keeps the page
// cache, so a journal that never syncs passes every kill test and loses records only on a
// power cut. Tests pass a recording double instead of the real calls to see what was
// synced, and when (tests/unit/batch/power_cut_files.h). Everything else uses
// real_file_syscalls(). Each call has its POSIX meaning, errno included.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>

namespace rapide::batch {

class FileSyscalls {
 public:
  virtual ~FileSyscalls() = default;
  // open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644): a descriptor, or -1.
  virtual int open_append(const std::string& path) = 0;
  // write(2): the bytes written (maybe fewer than `size`), or -1.
  virtual ssize_t write(int fd, const void* data, size_t size) = 0;
  // fdatasync(2): 0 once everything written to `fd` is on stable storage, or -1.
  virtual int fdatasync(int fd) = 0;
  // fsync(2) of directory `dir`: makes the entries created in it durable (a new file's
  // synced contents are lost with it otherwise). Best effort: failures are ignored.
  virtual void sync_directory(const std::string& dir) = 0;
  // close(2): 0 or -1.
  virtual int close(int fd) = 0;
};

// The real system calls; stateless, shared by every writer.
FileSyscalls& real_file_syscalls();

}  // namespace rapide::batch
