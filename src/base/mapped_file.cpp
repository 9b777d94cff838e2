#include "base/mapped_file.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>

#include "base/error.h"
#include "base/regular_file.h"

namespace rapide {

namespace {

// Model files and configs must be regular files: a FIFO would block the loader forever.
void require_open(const RegularFile& file, const std::string& path) {
  if (file.is_open()) return;
  if (file.wrong_type()) fail(ErrorCode::kInvalidArgument, "'{}' {}", path, file.error());
  fail(ErrorCode::kNotFound, "cannot open '{}': {}", path, file.error());
}

}  // namespace

std::shared_ptr<MappedFile> MappedFile::open(const std::string& path) {
  const RegularFile regular(path);
  require_open(regular, path);
  const int fd = regular.fd();
  std::shared_ptr<MappedFile> file(new MappedFile());
  file->path_ = path;
  file->size_ = static_cast<size_t>(regular.size());
  if (file->size_ > 0) {
    void* p = mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int e = errno;
      fail(ErrorCode::kResourceExhausted, "cannot map '{}': {}", path, std::strerror(e));
    }
    file->data_ = static_cast<const uint8_t*>(p);
  }
  // `regular` closes the descriptor; the mapping keeps the file alive.
  return file;
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) munmap(const_cast<uint8_t*>(data_), size_);
}

std::string read_text_file(const std::string& path) {
  RegularFile file(path);
  require_open(file, path);
  std::string text;
  if (!file.read_rest(text))
    fail(ErrorCode::kUnavailable, "cannot read '{}': {}", path, std::strerror(errno));
  return text;
}

}  // namespace rapide
