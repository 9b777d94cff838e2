#include "base/huge_pages.h"

#include <sys/mman.h>

#include <cstdlib>
#include <new>

namespace rapide {

namespace {
size_t round_up(size_t n, size_t to) {
  return (n + to - 1) / to * to;
}
}  // namespace

uint8_t* map_huge_pages(size_t bytes) {
  // Over-allocate by one huge page, then trim both ends to the aligned span.
  void* raw =
      mmap(nullptr, bytes + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const auto start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = round_up(start, kHugePage);
  if (aligned > start) munmap(raw, aligned - start);
  const uintptr_t end = start + bytes + kHugePage;
  if (end > aligned + bytes)
    munmap(reinterpret_cast<void*>(aligned + bytes), end - aligned - bytes);
  auto* base = reinterpret_cast<uint8_t*>(aligned);
  madvise(base, bytes, MADV_HUGEPAGE);  // advice only
  return base;
}

void unmap_pages(uint8_t* base, size_t bytes) {
  if (base != nullptr) munmap(base, bytes);
}

LargeBuffer::~LargeBuffer() {
  release();
}

void LargeBuffer::release() {
  if (mapped_ != 0) {
    unmap_pages(data_, mapped_);
  } else {
    std::free(data_);
  }
  data_ = nullptr;
  size_ = mapped_ = 0;
}

void LargeBuffer::resize(size_t bytes) {
  if (bytes == size_) return;
  release();
  if (bytes == 0) return;
  if (bytes >= kHugePage) {
    const size_t span = round_up(bytes, kHugePage);
    if (uint8_t* base = map_huge_pages(span)) {
      data_ = base;
      mapped_ = span;
      size_ = bytes;
      return;
    }
  }
  data_ = static_cast<uint8_t*>(std::aligned_alloc(64, round_up(bytes, 64)));
  if (data_ == nullptr) throw std::bad_alloc();
  size_ = bytes;
}

}  // namespace rapide
