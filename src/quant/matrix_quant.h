// Whole-matrix helpers of the calibrated quantizers: round-to-nearest (optionally weighted
// by an importance vector), dequantization, and the output error a quantized matrix causes
// on inputs with second moment H. Matrices are GGUF-ordered: rows of `cols` floats.
#pragma once

#include <cstdint>
#include <vector>

#include "formats/tensor_type.h"

namespace rapide::quant {

// rows * tensor_row_bytes(type, cols) bytes. channel_weights (cols values, e.g. mean x^2 of
// the input) steer the per-block scale search of the 32-weight types (block_grid.h); other
// types, or nullptr, get plain round-to-nearest (quantize_row).
std::vector<uint8_t> quantize_matrix(TensorType type, const float* w, int64_t rows, int64_t cols,
                                     const float* channel_weights = nullptr);
std::vector<float> dequantize_matrix(TensorType type, const uint8_t* data, int64_t rows,
                                     int64_t cols);

// sum over rows r of (wq_r - w_r) H (wq_r - w_r)^T: with H = X^T X / tokens, the mean
// squared error the quantized matrix adds to the layer's outputs over those inputs.
double output_error(const float* w, const float* wq, int64_t rows, int64_t cols,
                    const std::vector<float>& h);

}  // namespace rapide::quant
