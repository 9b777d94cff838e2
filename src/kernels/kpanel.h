// Q4_K, Q5_K and Q6_K weights repacked at prepare() time into 16-row panels for the integer
// dot-product loop (vpdpbusd), as Q4_0's are (matmul_internal.h), instead of being read as
// whole GGUF rows (kernels/rowquant.h). Unpacking a GGUF super-block row by row costs more
// instructions than streaming its bytes from memory (decode reached 40-69 % of the read
// probe); in a panel one 64-byte load holds 4 columns of 16 rows, each activation quad is
// broadcast once for 16 rows, and the 6-bit packed scales and mins are expanded at load.
//
// Per panel, one block per 256-column super-block: a header, then 8 chunks of 32 columns.
//   Q4_K / Q5_K header (320 bytes): d[16] f16, dmin[16] f16, scale[8 sub-blocks][16 rows] u8,
//               min[4 sub-block pairs][16 rows][2] u8 (a pair per row: one vpdpwssd operand)
//   Q6_K header (288 bytes): d[16] f16, scale[16 sub-blocks][16 rows] s8
//   chunk: [4 groups g][16 rows][4 bytes]: byte j holds the low 4 bits of column 4g + j
//          in its low nibble and of column 16 + 4g + j in its high one (256 bytes; Q4_0's
//          order), then the high bits, stored for the 8 vectors v = 2g + h (h: high nibble)
//          at byte [row][j]:  Q5_K: 64 bytes, bit v = bit 4 of the weight;
//                             Q6_K: 2 x 64 bytes, vector v in half v / 4, bits 2 (v % 4) + 0..1
// Weights are the unsigned stored values (Q6_K: signed + 32), the operand vpdpbusd wants;
// Q6_K's offset is removed by starting each sub-block's sum at -32 * (its activation sum).
// Blocks are 2368 / 2880 / 3360 bytes for 16 rows: Q6_K's bytes are the file's, Q4_K's and
// Q5_K's 2-3 % more (expanded scales). Every kernel computes the integers of llama.cpp's
// vec_dot (the same as kernels/rowquant.cpp's reference) and combines them per super-block
// with kquant_combine: bit-identical to the row-wise path.
#pragma once

#include <cstdint>

#include "formats/tensor_type.h"
#include "kernels/rowquant_unpack.h"

namespace rapide::matmul {

// Whether `type` is packed this way (when its activations are quantized).
bool is_kpanel_type(TensorType type);

struct KPanelLayout {
  int header;  // bytes before the first chunk
  int chunk;   // bytes per 32-column chunk: 256 of nibbles, then the high bits
  int block() const { return header + 8 * chunk; }
};
constexpr KPanelLayout kpanel_layout(TensorType type) {
  return type == TensorType::kQ6_K   ? KPanelLayout{288, 256 + 128}
         : type == TensorType::kQ5_K ? KPanelLayout{320, 256 + 64}
                                     : KPanelLayout{320, 256};
}

// Header offsets.
constexpr int kKpDmin = 32;     // Q4_K / Q5_K
constexpr int kKpScales = 64;   // Q4_K / Q5_K: [8][16] u8
constexpr int kKpMins = 192;    // Q4_K / Q5_K: [4][16][2] u8
constexpr int kKpScales6 = 32;  // Q6_K: [16][16] s8

// Row r of a panel block as unpack256 leaves a GGUF super-block (signed weights for Q6_K,
// scale and min per 16 weights): the scalar reference and dequantize_row read it so.
void kpanel_unpack(TensorType type, const uint8_t* block, int r, Unpacked256& u);

// Writes GGUF super-block b of `rows` rows (row_bytes apart, at most 16) into a panel block.
void kpanel_pack(TensorType type, const uint8_t* rows, int64_t row_bytes, int n_rows, int64_t b,
                 uint8_t* block);

}  // namespace rapide::matmul
