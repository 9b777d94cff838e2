// A read-only memory mapping of a whole file. Model weights are used in place from the
// mapping (no copy), so loading a model costs page faults, not a read of every byte.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace rapide {

class MappedFile {
 public:
  // Throws Error(kNotFound) if the file cannot be opened, kInvalidArgument for anything but a
  // regular file (a directory, or a FIFO, which is never waited on: base/regular_file.h).
  static std::shared_ptr<MappedFile> open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  MappedFile() = default;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

// Reads a whole (small) file into a string; throws Error(kNotFound) when unreadable and
// kInvalidArgument when it is not a regular file (as MappedFile::open).
std::string read_text_file(const std::string& path);

}  // namespace rapide
