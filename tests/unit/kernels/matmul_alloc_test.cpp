// A warmed-up WeightMatrix::multiply allocates nothing (decode calls it ~100 times a token).
// Own binary: it replaces the global operator new to count allocations.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <vector>

#include "kernels/matmul.h"

namespace {
std::atomic<long> g_allocations{0};
}  // namespace

void* operator new(size_t size) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size ? size : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, size_t) noexcept {
  std::free(p);
}

namespace rapide {
namespace {

TEST(WeightMatrixAllocation, WarmMultiplyDoesNotAllocate) {
  ThreadPool pool(2);
  for (TensorType type : kAllTensorTypes) {
    const int64_t rows = 96, cols = 256;
    std::vector<float> row(cols, 0.5f);
    std::vector<uint8_t> data(static_cast<size_t>(rows * tensor_row_bytes(type, cols)));
    for (int64_t r = 0; r < rows; ++r) {
      quantize_row(type, row.data(), data.data() + r * tensor_row_bytes(type, cols), cols);
    }
    TensorView view;
    view.type = type;
    view.shape = {cols, rows};
    view.data = data.data();
    view.size_bytes = data.size();
    const WeightMatrix w = WeightMatrix::prepare(view);
    std::vector<float> x(64 * cols, 0.25f), y(64 * rows);
    for (int64_t n : {64, 1, 17}) w.multiply(x.data(), n, y.data(), pool);  // warm up
    const long before = g_allocations.load();
    ASSERT_GT(before, 0);  // the counting operator new is in use
    for (int64_t n : {1, 3, 17, 64}) w.multiply(x.data(), n, y.data(), pool);
    EXPECT_EQ(g_allocations.load(), before) << tensor_type_name(type);
  }
}

}  // namespace
}  // namespace rapide
