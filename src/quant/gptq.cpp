#include "quant/gptq.h"

#include <cblas.h>
#include <lapacke.h>

#include <algorithm>

#include "base/error.h"
#include "formats/quant_blocks.h"
#include "kernels/superblock_plan.h"
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

// How GPTQ rounds: a group of columns (a 32-weight block or a 256-weight super-block) gets
// its scales when the sweep reaches the group's first column, from the row's already-updated
// weights; each column is then rounded on them, and the groups are packed at the end.
class BlockRounder {
 public:
  BlockRounder(TensorType type, int64_t rows, int64_t cols, const float* hdiag)
      : type_(type),
        cols_(cols),
        hdiag_(hdiag),
        grids_(static_cast<size_t>(rows * (cols / kBlock))),
        codes_(static_cast<size_t>(rows * cols)) {}
  static constexpr int64_t group() { return kBlock; }
  void plan(int64_t r, int64_t i, const float* x) {
    // The scale with the least rounding error weighted by each channel's activation energy
    // (diag H).
    int unused[kBlock];
    grid(r, i) = search_block_grid(type_, x, hdiag_ + i, unused);
  }
  float round(int64_t r, int64_t i, float v) {
    const BlockGrid& g = grid(r, i);
    const int code = g.nearest(v);
    codes_[r * cols_ + i] = code;
    return g.value(code);
  }
  void pack(int64_t r, int64_t i, uint8_t* out) const {
    pack_block(grids_[r * (cols_ / kBlock) + i / kBlock], codes_.data() + r * cols_ + i, out);
  }

 private:
  BlockGrid& grid(int64_t r, int64_t i) { return grids_[r * (cols_ / kBlock) + i / kBlock]; }
  TensorType type_;
  int64_t cols_;
  const float* hdiag_;
  std::vector<BlockGrid> grids_;
  std::vector<int> codes_;
};

class SuperBlockRounder {
 public:
  SuperBlockRounder(TensorType type, int64_t rows, int64_t cols)
      : type_(type), per_row_(cols / kSuperBlock), plans_(static_cast<size_t>(rows * per_row_)) {}
  static constexpr int64_t group() { return kSuperBlock; }
  void plan(int64_t r, int64_t i, const float* x) {
    // The type's own scale search (llama.cpp's make_qkx2_quants for Q2_K / Q4_K / Q5_K).
    plan_of(r, i) = matmul::plan_superblock(type_, x);
  }
  float round(int64_t r, int64_t i, float v) {
    matmul::SuperBlockPlan& p = plan_of(r, i);
    const int e = static_cast<int>(i % kSuperBlock);
    p.code[e] = matmul::superblock_nearest(p, e, v);
    return matmul::superblock_value(p, e, p.code[e]);
  }
  void pack(int64_t r, int64_t i, uint8_t* out) const {
    matmul::pack_superblock(plans_[r * per_row_ + i / kSuperBlock], out);
  }

 private:
  matmul::SuperBlockPlan& plan_of(int64_t r, int64_t i) {
    return plans_[r * per_row_ + i / kSuperBlock];
  }
  TensorType type_;
  int64_t per_row_;
  std::vector<matmul::SuperBlockPlan> plans_;
};

// The sweep (w: rows x cols, already with dead channels zeroed; u: upper Cholesky factor of
// H^-1). Lazy blocks are whole groups, so a group is planned from weights that have received
// every earlier column's update.
template <typename Rounder>
std::vector<uint8_t> sweep(Rounder& rounder, TensorType type, std::vector<float>& w, int64_t rows,
                           int64_t cols, const std::vector<float>& u, int64_t lazy) {
  const int64_t g = Rounder::group();
  const int64_t bsize = std::max(g, (lazy + g - 1) / g * g);
  std::vector<float> err(static_cast<size_t>(rows * bsize));
  for (int64_t i1 = 0; i1 < cols; i1 += bsize) {
    const int64_t i2 = std::min(cols, i1 + bsize);
    for (int64_t i = i1; i < i2; ++i) {
      const float uii = u[i * cols + i];
      for (int64_t r = 0; r < rows; ++r) {
        float* wr = w.data() + r * cols;
        if (i % g == 0) rounder.plan(r, i, wr + i);
        const float e = (wr[i] - rounder.round(r, i, wr[i])) / uii;
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
  const int64_t block = tensor_type_block_size(type), block_bytes = tensor_type_block_bytes(type);
  const int64_t blocks_per_row = cols / block;
  std::vector<uint8_t> out(static_cast<size_t>(rows * blocks_per_row * block_bytes));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < blocks_per_row; ++b) {
      rounder.pack(r, b * block, out.data() + (r * blocks_per_row + b) * block_bytes);
    }
  }
  return out;
}

}  // namespace

bool gptq_supports(TensorType type) {
  return has_block_grid(type) || matmul::has_superblock_plan(type);
}

std::vector<uint8_t> gptq_quantize(TensorType type, const float* w_in, int64_t rows, int64_t cols,
                                   const std::vector<float>& h_in, const GptqOptions& options) {
  if (!gptq_supports(type)) {
    fail(ErrorCode::kUnsupported,
         "gptq: type {} is not supported (use q4_0, q4_1, q5_0, q5_1, q8_0, iq4_nl, the "
         "k-quants q2_k..q6_k or iq4_xs)",
         tensor_type_name(type));
  }
  const int64_t block = tensor_type_block_size(type);
  if (cols % block != 0 || options.block % kBlock != 0) {
    fail(ErrorCode::kInvalidArgument, "gptq: {} columns are not whole {}-weight blocks", cols,
         block);
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
  if (has_block_grid(type)) {
    BlockRounder rounder(type, rows, cols, hdiag.data());
    return sweep(rounder, type, w, rows, cols, u, options.block);
  }
  SuperBlockRounder rounder(type, rows, cols);
  return sweep(rounder, type, w, rows, cols, u, options.block);
}

}  // namespace rapide::quant
