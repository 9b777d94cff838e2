// ActQuant::kOff: quantized weights against f32 activations. Each weight row is dequantized
// to f32 once per call by the ISA's dequant_row (this file's scalar twin is the
// dequantize_row every quantizer test checks; the SIMD ones convert Q8_0 / Q4_0 blocks in
// vectors, bit for bit the same) and dotted with each token's activations by its dot_f32
// (the SIMD ones differ from the scalar one only in summation order).
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/matmul.h"
#include "kernels/matmul_internal.h"

namespace rapide::matmul {

namespace scalar {
float dot_f32(const float* w, const float* x, int64_t n) {
  float acc = 0.0f;
  for (int64_t i = 0; i < n; ++i) acc = std::fmaf(w[i], x[i], acc);
  return acc;
}

void dequant_row(TensorType type, const uint8_t* row, float* out, int64_t n) {
  dequantize_row(type, row, out, n);
}
}  // namespace scalar

void dequant_panels(const KernelSet& ks, const PackedWeights& w, const Activations& a, int64_t p0,
                    int64_t p1, int64_t t0, int64_t t1, float* y) {
  // One row of f32 per thread: a row is reused by every token of [t0, t1) while in cache.
  thread_local std::vector<float> row;
  if (row.size() < static_cast<size_t>(w.cols)) row.resize(static_cast<size_t>(w.cols));
  const int64_t row_bytes = w.panel_bytes / kPanel;
  for (int64_t p = p0; p < p1; ++p) {
    const int rows = static_cast<int>(std::min<int64_t>(kPanel, w.rows - p * kPanel));
    for (int r = 0; r < rows; ++r) {
      ks.dequant_row(w.type, w.panel(p) + r * row_bytes, row.data(), w.cols);
      const int64_t out_row = p * kPanel + r;
      for (int64_t t = t0; t < t1; ++t) {
        y[t * w.rows + out_row] = ks.dot_f32(row.data(), a.f32 + t * a.stride, w.cols);
      }
    }
  }
}

}  // namespace rapide::matmul
