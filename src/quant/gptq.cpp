#include "quant/gptq.h"

#include <cblas.h>
#include <lapacke.h>

#include <algorithm>

#include "base/error.h"
#include "quant/block_grid.h"

namespace rapide::quant {
namespace {

constexpr int kBlock = 32;

// The upper Cholesky factor U of (H + lambda I)^-1 (H^-1 = U^T U), row-major in f32. The
// factorisation runs in double: H of a few thousand tokens is often near-singular.
std::vector<float> inverse_cholesky(std::vector<double> h, int64_t n, double damp) {
  double mean_diag = 0.0;
  for (int64_t i = 0; i < n; ++i) mean_diag += h[i * n + i];
  mean_diag /= static_cast<double>(n);
  if (mean_diag <= 0.0) mean_diag = 1.0;
  const int ni = static_cast<int>(n);
  for (int attempt = 0; attempt < 6; ++attempt, damp *= 10.0) {
    std::vector<double> a = h;
    for (int64_t i = 0; i < n; ++i) a[i * n + i] += damp * mean_diag;
    // H = L L^T, H^-1 from it, then H^-1 = U^T U.
    if (LAPACKE_dpotrf(LAPACK_ROW_MAJOR, 'L', ni, a.data(), ni) != 0) continue;
    if (LAPACKE_dpotri(LAPACK_ROW_MAJOR, 'L', ni, a.data(), ni) != 0) continue;
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = i + 1; j < n; ++j) a[i * n + j] = a[j * n + i];
    }
    if (LAPACKE_dpotrf(LAPACK_ROW_MAJOR, 'U', ni, a.data(), ni) != 0) continue;
    std::vector<float> u(static_cast<size_t>(n * n), 0.0f);
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = i; j < n; ++j) u[i * n + j] = static_cast<float>(a[i * n + j]);
    }
    return u;
  }
  fail(ErrorCode::kInvalidArgument, "gptq: the calibration Hessian is not positive definite");
}

}  // namespace

std::vector<uint8_t> gptq_quantize(TensorType type, const float* w_in, int64_t rows, int64_t cols,
                                   const std::vector<float>& h_in, const GptqOptions& options) {
  if (!has_block_grid(type)) {
    fail(ErrorCode::kUnsupported,
         "gptq: type {} is not supported (use q4_0, q4_1, q5_0, q5_1, "
         "q8_0 or iq4_nl)",
         tensor_type_name(type));
  }
  if (cols % kBlock != 0 || options.block % kBlock != 0) {
    fail(ErrorCode::kInvalidArgument, "gptq: {} columns are not whole 32-weight blocks", cols);
  }
  std::vector<float> w(w_in, w_in + rows * cols);
  std::vector<double> h(h_in.begin(), h_in.end());
  std::vector<float> hdiag(static_cast<size_t>(cols));
  for (int64_t i = 0; i < cols; ++i) hdiag[i] = h_in[i * cols + i];
  for (int64_t i = 0; i < cols; ++i) {
    if (h[i * cols + i] == 0.0) {  // a channel the calibration never saw: its weights do not matter
      h[i * cols + i] = 1.0;
      for (int64_t r = 0; r < rows; ++r) w[r * cols + i] = 0.0f;
    }
  }
  const std::vector<float> u = inverse_cholesky(std::move(h), cols, options.damp);

  const int64_t blocks_per_row = cols / kBlock;
  std::vector<BlockGrid> grids(static_cast<size_t>(rows * blocks_per_row));
  std::vector<int> codes(static_cast<size_t>(rows * cols));
  const int64_t bsize = options.block;
  std::vector<float> err(static_cast<size_t>(rows * bsize));
  for (int64_t i1 = 0; i1 < cols; i1 += bsize) {
    const int64_t i2 = std::min(cols, i1 + bsize);
    for (int64_t i = i1; i < i2; ++i) {
      const float uii = u[i * cols + i];
      for (int64_t r = 0; r < rows; ++r) {
        float* wr = w.data() + r * cols;
        BlockGrid& g = grids[r * blocks_per_row + i / kBlock];
        if (i % kBlock == 0) {
          // The block's scale from its already-updated weights, searched for the least
          // rounding error weighted by each channel's activation energy (diag H).
          int unused[kBlock];
          g = search_block_grid(type, wr + i, hdiag.data() + i, unused);
        }
        const int code = g.nearest(wr[i]);
        codes[r * cols + i] = code;
        const float e = (wr[i] - g.value(code)) / uii;
        err[r * bsize + (i - i1)] = e;
        for (int64_t j = i + 1; j < i2; ++j) wr[j] -= e * u[i * cols + j];
      }
    }
    if (i2 < cols) {  // the block's errors onto every later column, as one product
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(rows),
                  static_cast<int>(cols - i2), static_cast<int>(i2 - i1), -1.0f, err.data(),
                  static_cast<int>(bsize), u.data() + i1 * cols + i2, static_cast<int>(cols), 1.0f,
                  w.data() + i2, static_cast<int>(cols));
    }
  }
  const int64_t block_bytes = tensor_type_block_bytes(type);
  std::vector<uint8_t> out(static_cast<size_t>(rows * blocks_per_row * block_bytes));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < blocks_per_row; ++b) {
      pack_block(grids[r * blocks_per_row + b], codes.data() + r * cols + b * kBlock,
                 out.data() + (r * blocks_per_row + b) * block_bytes);
    }
  }
  return out;
}

}  // namespace rapide::quant
