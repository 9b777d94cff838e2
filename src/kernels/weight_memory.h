// Memory for packed weight matrices, backed by 2 MiB transparent huge pages where the
// system allows it.
//
// Decode streams every weight byte from DRAM once per token. With 4 KiB pages that stream
// crosses a page (and misses the TLB) every 64 cache lines; on 2 MiB pages the same Q8_0
// decode loop measured 10-15 % faster (Zen 4, 1 thread, CPU time, 106 MB of weights).
// Most matrices are smaller than 2 MiB (a 768 x 256 Q8_0 matrix is 204 KiB), so a page of
// their own would waste most of it: matrices share 2 MiB-aligned slabs instead, each
// marked MADV_HUGEPAGE, and a slab is returned to the system when its last matrix goes.
// Small buffers (tiny models, tests) come from the ordinary heap.
#pragma once

#include <cstddef>
#include <cstdint>

namespace rapide::matmul {

class WeightBuffer {
 public:
  WeightBuffer() = default;
  // Uninitialised, 64-byte aligned. Throws std::bad_alloc.
  explicit WeightBuffer(size_t bytes);
  ~WeightBuffer();
  WeightBuffer(WeightBuffer&& other) noexcept;
  WeightBuffer& operator=(WeightBuffer&& other) noexcept;
  WeightBuffer(const WeightBuffer&) = delete;
  WeightBuffer& operator=(const WeightBuffer&) = delete;

  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  // Whether the buffer lies in a huge-page slab (tests).
  bool in_slab() const { return slab_ != nullptr; }

  struct Slab;

 private:
  void release();

  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  Slab* slab_ = nullptr;  // null: from the heap
};

}  // namespace rapide::matmul
