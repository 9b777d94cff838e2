// Internals shared by the matmul front end (matmul.cpp) and its per-ISA kernels.
//
// Packed weight layout ("panels"): rows are grouped 16 at a time and each panel stores its
// 16 rows interleaved column by column, so one 512-bit vector holds the same column(s) of
// 16 rows. A kernel multiplies that vector by one activation value broadcast to every lane
// and accumulates 16 rows' results in one register: no horizontal reductions, each weight
// byte loaded once per tile of tokens, and a panel is one contiguous stream in memory.
// The last panel is padded with zero rows. Per panel:
//   F32:  [col][16 rows] f32                                         64 bytes per column
//   F16:  [col][16 rows] f16                                         32 bytes per column
//   BF16: [col pair][16 rows][2] bf16 (cols padded to even)          64 bytes per pair
//   Q8_0: per block of 32 cols: [16 f16 scales][8 groups][16 rows][4 bytes]     544 bytes;
//         each byte holds q + 128 (the sign bit flipped): the unsigned operand VNNI wants,
//         so the decode loop spends no instruction per load converting it.
//   Q4_0: per block: [16 f16 scales][4 groups][16 rows][4 bytes]               288 bytes;
//         byte j of group g holds col 4g+j in its low nibble, col 16+4g+j in its high one,
//         so one load yields two 64-byte operands for VNNI after masking/shifting.
// Groups of 4 columns match vpdpbusd, which sums 4 byte products into each 32-bit lane.
//   Q4_K / Q5_K / Q6_K: per 256-column super-block, kernels/kpanel.h's block.
//   Other row-wise types (kernels/rowquant.h): [16 rows][GGUF row bytes], as in the file.
//   Any quantized type with ActQuant::kOff (float_act): the same, read by dequant_panels.
#pragma once

#include <cstdint>

#include "formats/tensor_type.h"
#include "kernels/kpanel.h"
#include "kernels/rowquant.h"
#include "kernels/weight_memory.h"

namespace rapide::matmul {

constexpr int kPanel = 16;
constexpr int64_t kQ8PanelBlockBytes = 2 * kPanel + kPanel * kQuantBlock;      // 544
constexpr int64_t kQ4PanelBlockBytes = 2 * kPanel + kPanel * kQuantBlock / 2;  // 288

struct PackedWeights {
  TensorType type = TensorType::kF32;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t panels = 0;
  int64_t panel_bytes = 0;
  WeightBuffer data;       // huge-page backed where possible: decode streams all of it
  bool float_act = false;  // ActQuant::kOff on a quantized type: f32 activations

  // Whether panels hold whole GGUF rows (row-wise types, and every float_act matrix).
  bool raw_rows() const { return float_act || (is_row_type(type) && !is_kpanel_type(type)); }
  // Whether panels hold kernels/kpanel.h's k-quant blocks.
  bool kpanel() const { return !float_act && is_kpanel_type(type); }

  const uint8_t* panel(int64_t p) const { return data.data() + p * panel_bytes; }
  int64_t blocks() const { return cols / kQuantBlock; }
};

// Activations converted for the weight type, n tokens, token t at offset t * stride:
//   F32 / F16 weights: `f32` (for F16 already rounded to f16 precision), stride = cols
//   BF16: `bf16` pairs packed in 32 bits, stride = (cols + 1) / 2 pairs
//   Q8_0 / Q4_0: `q` int8 (stride = cols), per block scale `d` (f16-rounded like llama.cpp's
//   block_q8_0) and `bias` = -offset * (sum of the block's q), stride blocks per token: the
//   correction for kernels whose weights carry an unsigned offset (+128 or +8).
struct Activations {
  const float* f32 = nullptr;
  const uint32_t* bf16 = nullptr;
  const int8_t* q = nullptr;
  const float* d = nullptr;
  const int32_t* bias = nullptr;
  const float* s = nullptr;        // row-wise types with Q8_1 activations, per block
  const int16_t* bsums = nullptr;  // row-wise types with Q8_K activations, 16 per block
  int64_t stride = 0;
  int64_t blocks = 0;
};

// Writes y[t * w.rows + r] for rows of panels [p0, p1) and tokens [t0, t1).
using PanelKernel = void (*)(const PackedWeights& w, const Activations& a, int64_t p0, int64_t p1,
                             int64_t t0, int64_t t1, float* y);

// Per-ISA conversions of tokens [t0, t1) of x (n_cols floats each) into the buffers above.
using RoundKernel = void (*)(const float* x, float* out, int64_t count);        // f32 -> f16 -> f32
using Bf16Kernel = void (*)(const float* x, uint32_t* out, int64_t cols);       // one token
using QuantizeKernel = void (*)(const float* x, int64_t cols, int bias_offset,  // one token
                                int8_t* q, float* d, int32_t* bias);
// Q8_K (kernels/rowquant.h): one token, bit-identical to matmul::quantize_q8_k.
using QuantizeK8Kernel = void (*)(const float* x, int64_t cols, int8_t* q, float* d,
                                  int16_t* bsums);

// Dot product of n f32 values (ActQuant::kOff: a dequantized weight row with a token).
using FloatDot = float (*)(const float* w, const float* x, int64_t n);
// One GGUF row of `type` to n f32 values, bit-identical to dequantize_row (the scalar twin);
// the SIMD ones convert Q8_0 / Q4_0 blocks in vectors and call it for the other types.
using DequantRow = void (*)(TensorType type, const uint8_t* row, float* out, int64_t n);

struct KernelSet {
  RoundKernel round_f16;
  Bf16Kernel to_bf16;
  QuantizeKernel quantize_q8;
  QuantizeK8Kernel quantize_q8_k;
  PanelKernel f32, f16, bf16, q8_0, q4_0;
  int q8_bias_offset;             // what q8_0 expects in Activations::bias (q4_0 always wants 8)
  RowDot (*row_dot)(TensorType);  // the row-wise types' dot products
  RowDotTokens (*row_dot_tokens)(TensorType);  // of this ISA (see kernels/rowquant.h)
  RowDotRows (*row_dot_rows)(TensorType);
  FloatDot dot_f32;
  DequantRow dequant_row;
  PanelKernel kpanel;  // Q4_K, Q5_K, Q6_K panels (kernels/kpanel.h), any of the three
};

// One row-wise type's kernels: `dot` always; `tokens` (kRowTokens tokens x 1 row) and
// `rows` (kRowTile rows x 1 token) where the ISA has them, else null.
struct RowKernels {
  RowDot dot = nullptr;
  RowDotTokens tokens = nullptr;
  RowDotRows rows = nullptr;
};
inline RowKernels row_kernels(const KernelSet& ks, TensorType type) {
  return {ks.row_dot(type), ks.row_dot_tokens(type), ks.row_dot_rows(type)};
}

// Panels [p0, p1) x tokens [t0, t1) of a row-wise type: groups of kRowTokens tokens row by
// row, the rest token by token in tiles of kRowTile rows; each panel's rows are reused from
// cache by every token of the range.
void row_panels(const RowKernels& k, const PackedWeights& w, const Activations& a, int64_t p0,
                int64_t p1, int64_t t0, int64_t t1, float* y);

// Panels [p0, p1) x tokens [t0, t1) of a float_act matrix: each row is dequantized to f32
// once (ks.dequant_row) and dotted with every token's f32 activations (a.f32, ks.dot_f32).
void dequant_panels(const KernelSet& ks, const PackedWeights& w, const Activations& a, int64_t p0,
                    int64_t p1, int64_t t0, int64_t t1, float* y);

// The kernel family of each ISA level.
const KernelSet& reference_kernels();
const KernelSet& avx2_kernels();
const KernelSet& avx512_kernels();

namespace scalar {
float dot_f32(const float* w, const float* x, int64_t n);
void dequant_row(TensorType type, const uint8_t* row, float* out, int64_t n);
void round_f16(const float* x, float* out, int64_t count);
void to_bf16(const float* x, uint32_t* out, int64_t cols);
void quantize_q8(const float* x, int64_t cols, int bias_offset, int8_t* q, float* d, int32_t* bias);
void f32(const PackedWeights&, const Activations&, int64_t, int64_t, int64_t, int64_t, float*);
void f16(const PackedWeights&, const Activations&, int64_t, int64_t, int64_t, int64_t, float*);
void bf16(const PackedWeights&, const Activations&, int64_t, int64_t, int64_t, int64_t, float*);
void q8_0(const PackedWeights&, const Activations&, int64_t, int64_t, int64_t, int64_t, float*);
void q4_0(const PackedWeights&, const Activations&, int64_t, int64_t, int64_t, int64_t, float*);
void kpanel(const PackedWeights&, const Activations&, int64_t, int64_t, int64_t, int64_t, float*);
}  // namespace scalar

#define RAPIDE_DECLARE_KERNELS(ns)                                                                 \
  namespace ns {                                                                                   \
  float dot_f32(const float* w, const float* x, int64_t n);                                        \
  void dequant_row(TensorType type, const uint8_t* row, float* out, int64_t n);                    \
  void round_f16(const float* x, float* out, int64_t count);                                       \
  void to_bf16(const float* x, uint32_t* out, int64_t cols);                                       \
  void quantize_q8(const float* x, int64_t cols, int bias_offset, int8_t* q, float* d,             \
                   int32_t* bias);                                                                 \
  void quantize_q8_k(const float* x, int64_t cols, int8_t* q, float* d, int16_t* bsums);           \
  void f32(const PackedWeights&, const Activations&, int64_t, int64_t, int64_t, int64_t, float*);  \
  void f16(const PackedWeights&, const Activations&, int64_t, int64_t, int64_t, int64_t, float*);  \
  void bf16(const PackedWeights&, const Activations&, int64_t, int64_t, int64_t, int64_t, float*); \
  void q8_0(const PackedWeights&, const Activations&, int64_t, int64_t, int64_t, int64_t, float*); \
  void q4_0(const PackedWeights&, const Activations&, int64_t, int64_t, int64_t, int64_t, float*); \
  void kpanel(const PackedWeights&, const Activations&, int64_t, int64_t, int64_t, int64_t,        \
              float*);                                                                             \
  }
RAPIDE_DECLARE_KERNELS(avx2)
RAPIDE_DECLARE_KERNELS(avx512)
#undef RAPIDE_DECLARE_KERNELS

// Element accessors of the packed layout (packing, dequantize_row, reference kernels).
inline uint16_t q_scale(const uint8_t* panel_block, int row) {
  return reinterpret_cast<const uint16_t*>(panel_block)[row];
}
inline int q8_value(const uint8_t* panel_block, int row, int col) {
  const uint8_t* q = panel_block + 2 * kPanel;
  return static_cast<int>(q[(col / 4) * kPanel * 4 + row * 4 + col % 4]) - 128;
}
// The nibble 0..15 (weight = d * (nibble - 8)).
inline int q4_nibble(const uint8_t* panel_block, int row, int col) {
  const uint8_t* q = panel_block + 2 * kPanel;
  const int c = col % 16;
  const uint8_t byte = q[(c / 4) * kPanel * 4 + row * 4 + c % 4];
  return col < 16 ? (byte & 0x0f) : (byte >> 4);
}

}  // namespace rapide::matmul
