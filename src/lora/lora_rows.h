// The low-rank updates of one forward pass whose rows may each use a different adapter (the
// segmented gather-matmul of Punica / S-LoRA): after a base product y = W x over all rows, the
// rows are taken adapter by adapter, each group's rows gathered, multiplied by its A and then
// its B, and scale * B (A x) added to their rows of y. The base weights are read once for the
// whole batch; each adapter's small matrices once per group.
//
// A row's result does not depend on its batch-mates: the products run on WeightMatrix, whose
// result for a token does not depend on the other tokens of the product (what every batch-
// invariance test of the model relies on, tests/golden/batch_invariance_test.cpp; checked for
// these products by tests/unit/lora/lora_batch_test.cpp), and the add is per element,
// y + (d * scale), as llama.cpp's ggml_add(res, ggml_scale(B A x, scale)) computes it.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "base/thread_pool.h"
#include "lora/lora_adapter.h"

namespace rapide {

inline constexpr int32_t kBaseAdapter = -1;  // a row that runs the base model alone

class LoraRows {
 public:
  // Groups `n` rows by the adapter each names (row_adapters[i], kBaseAdapter or an index of the
  // adapter list apply() receives; empty: every row is the base's). Keeps its buffers: no
  // allocation in steady state.
  void plan(std::span<const int32_t> row_adapters, int n);
  // Whether no row uses an adapter (then apply() does nothing).
  bool empty() const { return groups_.empty(); }

  // y[r * out ..] += scale * B (A x[r * in ..]) for every row r whose adapter adapts `target`
  // of `layer` (in = A's columns, out = B's rows; x and y hold all n planned rows).
  void apply(std::span<const std::shared_ptr<const LoraAdapter>> adapters, int layer,
             LoraTarget target, const float* x, float* y, ThreadPool& pool);

  // The scalar reference of one adapter's update on n consecutive rows (single-threaded
  // reference kernels): what apply() must give each of those rows, for tests.
  static void apply_reference(const LoraWeights& w, const float* x, int64_t n, float* y);

 private:
  struct Group {
    int32_t adapter = 0;
    int begin = 0, end = 0;   // range of rows_
    bool contiguous = false;  // rows_[begin..end) are consecutive rows: no gather needed
  };
  std::vector<int> rows_;  // row indices, grouped by adapter (ascending), in row order within
  std::vector<Group> groups_;
  std::vector<float> gathered_, low_, delta_;
};

}  // namespace rapide
