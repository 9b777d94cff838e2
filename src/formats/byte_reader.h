// A bounds-checked little-endian cursor over bytes, shared by the binary format parsers.
//
// Every read checks the remaining length first and throws Error(kCorrupt) naming the file
// and what was being read, so a truncated or hostile file can never make a parser read past
// its buffer: parsers describe the field, the reader enforces the bounds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>

#include "base/error.h"

namespace rapide {

class ByteReader {
 public:
  ByteReader(const uint8_t* data, size_t size, std::string_view file)
      : data_(data), size_(size), file_(file) {}

  size_t offset() const { return offset_; }
  size_t size() const { return size_; }
  size_t remaining() const { return size_ - offset_; }
  const uint8_t* data() const { return data_; }
  std::string_view file() const { return file_; }

  // Reads a little-endian scalar (the project targets x86-64, so a memcpy is the decode).
  template <typename T>
  T read(std::string_view what) {
    static_assert(std::is_trivially_copyable_v<T>);
    require(sizeof(T), what);
    T value;
    std::memcpy(&value, data_ + offset_, sizeof(T));
    offset_ += sizeof(T);
    return value;
  }

  // Returns a view of the next n bytes and advances past them.
  const uint8_t* take(uint64_t n, std::string_view what) {
    require(n, what);
    const uint8_t* p = data_ + offset_;
    offset_ += static_cast<size_t>(n);
    return p;
  }

  void skip(uint64_t n, std::string_view what) { take(n, what); }

  void require(uint64_t n, std::string_view what) const {
    if (n > remaining()) {
      fail(ErrorCode::kCorrupt,
           "'{}': truncated while reading {} at offset {} (needs {} bytes, {} left)", file_, what,
           offset_, n, remaining());
    }
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t offset_ = 0;
  std::string_view file_;
};

}  // namespace rapide
