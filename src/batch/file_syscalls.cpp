#include "batch/file_syscalls.h"

#include <fcntl.h>
#include <unistd.h>

namespace rapide::batch {

namespace {

class RealFileSyscalls final : public FileSyscalls {
 public:
  int open_append(const std::string& path) override {
    return ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  }
  ssize_t write(int fd, const void* data, size_t size) override {
    return ::write(fd, data, size);
  }
  int fdatasync(int fd) override { return ::fdatasync(fd); }
  void sync_directory(const std::string& dir) override {
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return;
    ::fsync(fd);
    ::close(fd);
  }
  int close(int fd) override { return ::close(fd); }
};

}  // namespace

FileSyscalls& real_file_syscalls() {
  static RealFileSyscalls real;
  return real;
}

}  // namespace rapide::batch
