// A heap buffer aligned for AVX-512 loads (64 bytes), sized once and reused.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <memory>
#include <new>

namespace rapide {

template <typename T>
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t count) { resize(count); }

  void resize(size_t count) {
    if (count == count_) return;
    size_t bytes = (count * sizeof(T) + 63) / 64 * 64;
    void* p = bytes ? std::aligned_alloc(64, bytes) : nullptr;
    if (bytes && !p) throw std::bad_alloc();
    data_.reset(static_cast<T*>(p));
    count_ = count;
  }
  T* data() { return data_.get(); }
  const T* data() const { return data_.get(); }
  size_t size() const { return count_; }
  T& operator[](size_t i) { return data_.get()[i]; }
  const T& operator[](size_t i) const { return data_.get()[i]; }

 private:
  struct Free {
    void operator()(T* p) const { std::free(p); }
  };
  std::unique_ptr<T, Free> data_;
  size_t count_ = 0;
};

}  // namespace rapide
