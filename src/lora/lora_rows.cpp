#include "lora/lora_rows.h"

#include <algorithm>
#include <cstring>

namespace rapide {

namespace {

// y + (d * scale), element by element (kept as two float operations: no fused multiply-add
// on the baseline ISA this file is built for, so every row gets llama.cpp's two roundings).
void add_scaled(float* y, const float* d, int64_t n, float scale) {
  for (int64_t i = 0; i < n; ++i) y[i] += d[i] * scale;
}

}  // namespace

void LoraRows::plan(std::span<const int32_t> row_adapters, int n) {
  rows_.clear();
  groups_.clear();
  if (row_adapters.empty()) return;
  int32_t top = kBaseAdapter;
  for (int i = 0; i < n; ++i) top = std::max(top, row_adapters[i]);
  // Few adapters per batch: one pass per adapter index present keeps rows in order.
  for (int32_t a = 0; a <= top; ++a) {
    const int begin = static_cast<int>(rows_.size());
    for (int i = 0; i < n; ++i) {
      if (row_adapters[i] == a) rows_.push_back(i);
    }
    const int end = static_cast<int>(rows_.size());
    if (end == begin) continue;
    groups_.push_back({a, begin, end, rows_[end - 1] - rows_[begin] == end - begin - 1});
  }
}

void LoraRows::apply(std::span<const std::shared_ptr<const LoraAdapter>> adapters, int layer,
                     LoraTarget target, const float* x, float* y, ThreadPool& pool) {
  for (const Group& g : groups_) {
    const LoraWeights* w = adapters[g.adapter]->find(layer, target);
    if (w == nullptr) continue;
    const int64_t m = g.end - g.begin;
    const int64_t in = w->a.cols(), rank = w->a.rows(), out = w->b.rows();
    const float* xs = x + static_cast<size_t>(rows_[g.begin]) * in;
    if (!g.contiguous) {
      gathered_.resize(static_cast<size_t>(m * in));
      for (int64_t j = 0; j < m; ++j) {
        std::memcpy(gathered_.data() + j * in, x + static_cast<size_t>(rows_[g.begin + j]) * in,
                    in * sizeof(float));
      }
      xs = gathered_.data();
    }
    low_.resize(static_cast<size_t>(m * rank));
    delta_.resize(static_cast<size_t>(m * out));
    w->a.multiply(xs, m, low_.data(), pool);
    w->b.multiply(low_.data(), m, delta_.data(), pool);
    for (int64_t j = 0; j < m; ++j) {
      add_scaled(y + static_cast<size_t>(rows_[g.begin + j]) * out, delta_.data() + j * out, out,
                 w->scale);
    }
  }
}

void LoraRows::apply_reference(const LoraWeights& w, const float* x, int64_t n, float* y) {
  const int64_t rank = w.a.rows(), out = w.b.rows();
  std::vector<float> low(static_cast<size_t>(n * rank)), delta(static_cast<size_t>(n * out));
  w.a.multiply_reference(x, n, low.data());
  w.b.multiply_reference(low.data(), n, delta.data());
  for (int64_t j = 0; j < n; ++j) add_scaled(y + j * out, delta.data() + j * out, out, w.scale);
}

}  // namespace rapide
