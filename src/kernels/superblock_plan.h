// A k-quant (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K) or IQ4_XS super-block of 256 weights in plain
// integers, between choosing its scales and packing it into llama.cpp's block layout: the
// seam that calibrated quantizers round through for these types (block_grid.h in src/quant
// is the same seam for the 32-weight types).
//
// Round-to-nearest (quantize_row) plans a super-block from its 256 values and packs it at
// once. GPTQ plans it when it reaches the super-block's first column, then rounds each later
// column on the planned scales after error compensation has moved it (superblock_nearest),
// overwriting the codes, and packs at the end. The value of code c of weight e, as
// dequantize_row computes it from the packed bytes (j = e / 16, the 16-weight group; the
// 32-weight groups of Q4_K / Q5_K / IQ4_XS hold equal pairs of scale[j]):
//   Q2_K c in 0..3, Q4_K 0..15, Q5_K 0..31:   d * scale[j] * c - dmin * min[j]
//   Q3_K c in -4..3, Q6_K -32..31:            d * scale[j] * c
//   IQ4_XS c in 0..15:                        d * scale[j] * kIq4nlValues[c]
// d and dmin are the stored f16 super-block scales; scale[j] and min[j] the integers stored
// per group (signed, offsets removed).
#pragma once

#include <cstdint>

#include "formats/tensor_type.h"
#include "kernels/rowquant.h"

namespace rapide::matmul {

struct SuperBlockPlan {
  TensorType type = TensorType::kQ4_K;
  int code[256];
  int scale[16];
  int min[16];
  uint16_t d = 0, dmin = 0;
};

// Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and IQ4_XS.
bool has_superblock_plan(TensorType type);

// The scales and codes quantize_row_blocks would write for the 256 values x (`search`: see
// ScaleSearch). Throws Error(kUnsupported) for other types.
SuperBlockPlan plan_superblock(TensorType type, const float* x,
                               ScaleSearch search = ScaleSearch::kSearch);

// What dequantize_row yields for weight e (0..255) holding `code`.
float superblock_value(const SuperBlockPlan& plan, int e, int code);

// The code of weight e whose value on the planned scales is nearest v.
int superblock_nearest(const SuperBlockPlan& plan, int e, float v);

// Writes the block (tensor_type_block_bytes(plan.type) bytes).
void pack_superblock(const SuperBlockPlan& plan, uint8_t* out);

}  // namespace rapide::matmul
