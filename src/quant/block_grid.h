// The values one 32-weight block of a quantized type can hold once its scale (and min) are
// fixed: the seam that calibrated quantizers round through.
//
// Round-to-nearest (quantize_row) picks a block's scale from its values and rounds every
// weight with it in one go. GPTQ instead fixes the scale when it reaches the block's first
// column and rounds the later columns one at a time after error compensation has moved
// them; an importance-weighted search tries several scales and keeps the one with the least
// weighted error. Both need "the grid of this block" and "pack these codes": this file.
//
// Types: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL (the 32-weight block types). A block's value
// for code c is d * level(c) + m, as dequantize_row computes it from the packed bytes:
//   Q4_0 c-8 (c 0..15)   Q5_0 c-16 (c 0..31)   Q8_0 c-128 (c 1..255)   IQ4_NL kIq4nlValues[c]
//   Q4_1 c (0..15) + m   Q5_1 c (0..31) + m
// The k-quants and IQ4_XS (256-weight super-blocks, nested scales) have no grid here.
#pragma once

#include <cstdint>

#include "formats/tensor_type.h"

namespace rapide::quant {

bool has_block_grid(TensorType type);

struct BlockGrid {
  TensorType type = TensorType::kQ4_0;
  uint16_t d16 = 0, m16 = 0;  // the stored f16 scale and min (m: Q4_1 / Q5_1)
  float d = 0.0f, m = 0.0f;   // their values

  int codes() const;            // number of codes
  float value(int code) const;  // what dequantize_row yields for `code`
  int nearest(float v) const;   // the code whose value is nearest v
};

// The grid round-to-nearest would choose for the 32 values x (the largest magnitude at the
// type's extreme level, or [min, max] for Q4_1 / Q5_1), with its scale multiplied by
// `scale_factor` (a search over scales; 1 = round-to-nearest's).
BlockGrid make_block_grid(TensorType type, const float* x, float scale_factor = 1.0f);

// Writes the block (tensor_type_block_bytes(type) bytes) holding 32 codes.
void pack_block(const BlockGrid& grid, const int* codes, uint8_t* out);

// The grid of the 32 values x with the least sum_j weight[j] * (x_j - value)^2 among
// scales around round-to-nearest's (0.80 .. 1.20 of it in steps of 0.02; the shrunken ones
// trade clipping the extreme weight for finer steps everywhere else), and the codes of x on
// it. weight == nullptr: round-to-nearest's grid.
BlockGrid search_block_grid(TensorType type, const float* x, const float* weight, int* codes);

// Quantizes a row of n values (a multiple of 32), each block on search_block_grid's grid
// (llama.cpp's quant_weights idea: an importance vector makes the scale search favour the
// channels whose activations are large). weights == nullptr: plain round-to-nearest.
void quantize_row_weighted(TensorType type, const float* x, const float* weights, uint8_t* out,
                           int64_t n);

}  // namespace rapide::quant
