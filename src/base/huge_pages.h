// Anonymous memory on 2 MiB transparent huge pages, where the system allows them.
//
// Streams that walk far apart in a large buffer cross a 4 KiB page every few cache lines and
// miss the TLB each time: weights at decode (kernels/weight_memory.h), and the KV cache, whose
// attention reads a 2 KiB run per (layer, head) from every block of a sequence, each block
// 192 KiB from the next for synth100m. Linux grants huge pages to a mapping marked
// MADV_HUGEPAGE even in its default "madvise" mode; elsewhere the advice is ignored and the
// memory simply stays on 4 KiB pages.
#pragma once

#include <cstddef>
#include <cstdint>

namespace rapide {

inline constexpr size_t kHugePage = size_t{2} << 20;

// A zeroed, 2 MiB-aligned anonymous mapping of `bytes` (a multiple of kHugePage) advised
// MADV_HUGEPAGE, or null when the system refuses the mapping. Release with unmap_pages.
uint8_t* map_huge_pages(size_t bytes);
void unmap_pages(uint8_t* base, size_t bytes);

// A byte buffer sized once (resize) and reused: from map_huge_pages when it is at least one
// huge page, otherwise (or when the mapping is refused) 64-byte aligned from the heap.
// Contents are unspecified after resize.
class LargeBuffer {
 public:
  LargeBuffer() = default;
  ~LargeBuffer();
  LargeBuffer(const LargeBuffer&) = delete;
  LargeBuffer& operator=(const LargeBuffer&) = delete;

  void resize(size_t bytes);  // throws std::bad_alloc
  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  bool on_huge_pages() const { return mapped_ != 0; }  // mapped (the kernel may still decline)

 private:
  void release();

  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  size_t mapped_ = 0;  // bytes mapped by map_huge_pages, 0 for heap memory
};

}  // namespace rapide
