// GPTQ (Frantar et al., 2022): quantizes a matrix column by column, spreading each
// column's rounding error over the columns not yet quantized so that the layer's output
// error on the calibration inputs, (W - Q) H (W - Q)^T with H = X^T X / tokens, stays
// small, instead of each weight's own error.
//
// As in the reference implementation: damping lambda = 0.01 * mean(diag H) added to the
// diagonal; channels never active (H_ii = 0) are zeroed; the updates use the upper Cholesky
// factor U of H^-1 (LAPACK); columns are processed in blocks of 128 whose updates to the
// rest of the matrix are applied lazily, once per block, as one matrix product (BLAS).
// Group-wise scales match the type's blocks: a 32-weight block's grid (block_grid.h) is
// chosen when its first column is reached, from the already-updated weights of that block
// (the scale among 0.8-1.2x round-to-nearest's with the least error weighted by diag H), and
// the block's later columns are rounded on that grid. The k-quants and IQ4_XS work the same
// way per 256-weight super-block: when the sweep reaches its first column, the type's own
// scale choice (kernels/superblock_plan.h: group scales and mins, rounded to the super-block's
// integer levels) is made from the updated weights, and each later column is rounded on
// those scales; lazy blocks are then whole super-blocks (256 columns). The output has
// exactly the layout quantize_row writes.
#pragma once

#include <cstdint>
#include <vector>

#include "formats/tensor_type.h"

namespace rapide::quant {

struct GptqOptions {
  float damp = 0.01f;  // lambda as a fraction of mean(diag H)
  int block = 128;     // columns per lazy-update block (a multiple of 32)
};

// Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL (block grids), Q2_K..Q6_K and IQ4_XS (super-block
// plans).
bool gptq_supports(TensorType type);

// w: rows x cols (GGUF order), h: cols x cols (row-major, symmetric). Throws
// Error(kUnsupported) for a type gptq_supports() refuses.
std::vector<uint8_t> gptq_quantize(TensorType type, const float* w, int64_t rows, int64_t cols,
                                   const std::vector<float>& h, const GptqOptions& options = {});

}  // namespace rapide::quant
