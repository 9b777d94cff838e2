// Opening a file to read that must be a regular file, without ever blocking in open().
//
// open(2) on a FIFO blocks until a writer appears, and a device may do anything: a FIFO
// planted where a model file, a config.json or an offloaded KV block is expected would hang
// the thread that opens it forever. So files are opened with O_NONBLOCK (which makes open()
// of a FIFO return at once), checked with fstat() to be regular files, and only then read
// (in blocking mode again: a regular file's reads never wait for a peer).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace rapide {

class RegularFile {
 public:
  // Opens `path` read-only. On failure is_open() is false and error() says why ("not a
  // regular file", or the errno text).
  explicit RegularFile(const std::string& path);
  ~RegularFile();
  RegularFile(const RegularFile&) = delete;
  RegularFile& operator=(const RegularFile&) = delete;

  bool is_open() const { return fd_ >= 0; }
  const std::string& error() const { return error_; }
  // True when the path exists but is something else than a regular file (FIFO, directory,
  // device, socket): callers tell that apart from a missing file.
  bool wrong_type() const { return wrong_type_; }
  int fd() const { return fd_; }
  uint64_t size() const { return size_; }  // as fstat() saw it at open

  // Reads exactly `n` bytes from the current position; false on EOF or error.
  bool read_exact(void* data, size_t n);
  // The whole file from the current position to its end.
  bool read_rest(std::string& out);

 private:
  int fd_ = -1;
  uint64_t size_ = 0;
  bool wrong_type_ = false;
  std::string error_;
};

}  // namespace rapide
