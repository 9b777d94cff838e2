#include "kernels/weight_memory.h"

#include "base/huge_pages.h"

#include <cstdlib>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

namespace rapide::matmul {

namespace {

// Slabs are this large unless one matrix needs more: big enough that the tail left when
// the next matrix does not fit wastes little, small enough to give back on unload.
constexpr size_t kSlabBytes = size_t{32} << 20;
// Below this a buffer is not worth a share of a huge page (tiny models, tests).
constexpr size_t kMinSlabAlloc = size_t{64} << 10;

size_t round_up(size_t n, size_t to) {
  return (n + to - 1) / to * to;
}

}  // namespace

struct WeightBuffer::Slab {
  uint8_t* base = nullptr;
  size_t size = 0;
  size_t used = 0;
  size_t live = 0;  // buffers still allocated from it
};

namespace {

struct SlabPool {
  std::mutex mutex;
  std::vector<WeightBuffer::Slab*> slabs;
};

SlabPool& slab_pool() {
  static SlabPool* pool = new SlabPool;  // never destroyed: buffers may outlive statics
  return *pool;
}

}  // namespace

WeightBuffer::WeightBuffer(size_t bytes) : size_(bytes) {
  if (bytes >= kMinSlabAlloc) {
    const size_t need = round_up(bytes, 64);
    SlabPool& pool = slab_pool();
    std::lock_guard<std::mutex> lock(pool.mutex);
    for (Slab* s : pool.slabs) {
      if (s->size - s->used >= need) {
        slab_ = s;
        break;
      }
    }
    if (slab_ == nullptr) {
      const size_t slab_bytes = round_up(need > kSlabBytes ? need : kSlabBytes, kHugePage);
      if (uint8_t* base = map_huge_pages(slab_bytes)) {
        auto* s = new Slab;
        s->base = base;
        s->size = slab_bytes;
        pool.slabs.push_back(s);
        slab_ = s;
      }
    }
    if (slab_ != nullptr) {
      data_ = slab_->base + slab_->used;
      slab_->used += need;
      ++slab_->live;
      return;
    }
  }
  data_ = static_cast<uint8_t*>(std::aligned_alloc(64, round_up(bytes ? bytes : 1, 64)));
  if (data_ == nullptr) throw std::bad_alloc();
}

WeightBuffer::~WeightBuffer() {
  release();
}

WeightBuffer::WeightBuffer(WeightBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      slab_(std::exchange(other.slab_, nullptr)) {}

WeightBuffer& WeightBuffer::operator=(WeightBuffer&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    slab_ = std::exchange(other.slab_, nullptr);
  }
  return *this;
}

void WeightBuffer::release() {
  if (data_ == nullptr) return;
  if (slab_ == nullptr) {
    std::free(data_);
  } else {
    SlabPool& pool = slab_pool();
    std::lock_guard<std::mutex> lock(pool.mutex);
    if (--slab_->live == 0) {
      unmap_pages(slab_->base, slab_->size);
      std::erase(pool.slabs, slab_);
      delete slab_;
    }
  }
  data_ = nullptr;
  size_ = 0;
  slab_ = nullptr;
}

}  // namespace rapide::matmul
