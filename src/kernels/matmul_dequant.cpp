// ActQuant::kOff: quantized weights against f32 activations. Each weight row is dequantized
// to f32 once per call (the same dequantize_row every quantizer test checks) and dotted with
// each token's activations by the ISA's dot_f32 (this file: the scalar twin; the SIMD ones
// in matmul_dequant_avx2.cpp / _avx512.cpp differ from it only in summation order).
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
}  // namespace scalar

void dequant_panels(FloatDot dot, const PackedWeights& w, const Activations& a, int64_t p0,
                    int64_t p1, int64_t t0, int64_t t1, float* y) {
  // One row of f32 per thread: a row is reused by every token of [t0, t1) while in cache.
  thread_local std::vector<float> row;
  if (row.size() < static_cast<size_t>(w.cols)) row.resize(static_cast<size_t>(w.cols));
  const int64_t row_bytes = w.panel_bytes / kPanel;
  for (int64_t p = p0; p < p1; ++p) {
    const int rows = static_cast<int>(std::min<int64_t>(kPanel, w.rows - p * kPanel));
    for (int r = 0; r < rows; ++r) {
      dequantize_row(w.type, w.panel(p) + r * row_bytes, row.data(), w.cols);
      const int64_t out_row = p * kPanel + r;
      for (int64_t t = t0; t < t1; ++t) {
        y[t * w.rows + out_row] = dot(row.data(), a.f32 + t * a.stride, w.cols);
      }
    }
  }
}

}  // namespace rapide::matmul
