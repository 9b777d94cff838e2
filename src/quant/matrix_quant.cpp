#include "quant/matrix_quant.h"

#include <cblas.h>

#include "kernels/matmul.h"
#include "quant/block_grid.h"

namespace rapide::quant {

std::vector<uint8_t> quantize_matrix(TensorType type, const float* w, int64_t rows, int64_t cols,
                                     const float* channel_weights) {
  const int64_t row_bytes = tensor_row_bytes(type, cols);
  std::vector<uint8_t> out(static_cast<size_t>(rows * row_bytes));
  const bool weighted = channel_weights != nullptr && has_block_grid(type);
  for (int64_t r = 0; r < rows; ++r) {
    if (weighted) {
      quantize_row_weighted(type, w + r * cols, channel_weights, out.data() + r * row_bytes, cols);
    } else {
      quantize_row(type, w + r * cols, out.data() + r * row_bytes, cols);
    }
  }
  return out;
}

std::vector<float> dequantize_matrix(TensorType type, const uint8_t* data, int64_t rows,
                                     int64_t cols) {
  const int64_t row_bytes = tensor_row_bytes(type, cols);
  std::vector<float> out(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    dequantize_row(type, data + r * row_bytes, out.data() + r * cols, cols);
  }
  return out;
}

double output_error(const float* w, const float* wq, int64_t rows, int64_t cols,
                    const std::vector<float>& h) {
  std::vector<float> e(static_cast<size_t>(rows * cols)), eh(e.size());
  for (size_t i = 0; i < e.size(); ++i) e[i] = wq[i] - w[i];
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(rows),
              static_cast<int>(cols), static_cast<int>(cols), 1.0f, e.data(),
              static_cast<int>(cols), h.data(), static_cast<int>(cols), 0.0f, eh.data(),
              static_cast<int>(cols));
  double sum = 0.0;
  for (size_t i = 0; i < e.size(); ++i) sum += static_cast<double>(e[i]) * eh[i];
  return sum;
}

}  // namespace rapide::quant
