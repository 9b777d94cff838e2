// Row-wise quantized weight types: Q4_1, Q5_0, Q5_1, IQ4_NL (32-weight blocks) and the
// k-quants Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS (256-weight super-blocks).
//
// Unlike Q8_0/Q4_0 these are not repacked into column-interleaved panels: a panel is 16
// whole GGUF rows back to back, and a kernel takes one row's dot product with one token's
// converted activations (llama.cpp's vec_dot structure). Exception: Q4_K, Q5_K and Q6_K
// are repacked (kernels/kpanel.h); their scalar dot product here stays the definition
// their panel kernels reproduce. The activations are converted as
// llama.cpp's CPU backend converts them (its vec_dot_type), so logits match its own:
//   Q5_0, IQ4_NL            -> Q8_0: 32 int8 per block, f16-rounded scale d
//   Q4_1, Q5_1              -> Q8_1: Q8_0 plus s = f16(d * sum q) with the unrounded d
//   k-quants, IQ4_XS        -> Q8_K: 256 int8 per block, f32 d = 1 / (-127 / xm) where xm
//                              is the x of largest |x|, plus bsums, the sum of each 16 q
// The integer part of each block's dot product is exact, so every SIMD kernel computes the
// same integers as its scalar twin and combines them into floats with the same operations
// (kquant_combine below; the 32-weight types' order is dot32 in rowquant.cpp): the
// variants agree bit for bit.
#pragma once

#include <cmath>
#include <cstdint>

#include "base/fp16.h"
#include "formats/tensor_type.h"

namespace rapide::matmul {

enum class RowAct { kQ8_0, kQ8_1, kQ8_K };

// Whether `type` takes the row-wise path described above.
bool is_row_type(TensorType type);
RowAct row_activation(TensorType type);
// Elements per activation block: 32 or 256.
inline int row_act_block(RowAct act) {
  return act == RowAct::kQ8_K ? kSuperBlock : 32;
}

// One token's converted activations: q (cols int8), d (one per activation block), s (Q8_1:
// one per block), bsums (Q8_K: 16 per block).
struct ActRow {
  const int8_t* q;
  const float* d;
  const float* s;
  const int16_t* bsums;
};

// Dot product of one weight row (`blocks` GGUF blocks) with one token.
using RowDot = float (*)(const uint8_t* row, int64_t blocks, const ActRow& x);
// The same for kRowTokens tokens at once (out[t] for xs[t]), each bit-identical to RowDot:
// a row's weights are unpacked once for all of them (prefill).
constexpr int kRowTokens = 4;
using RowDotTokens = void (*)(const uint8_t* row, int64_t blocks, const ActRow* xs, float* out);
// The same for kRowTile rows (row_bytes apart) and one token (decode): out[r] for row r.
constexpr int kRowTile = 4;
using RowDotRows = void (*)(const uint8_t* rows, int64_t row_bytes, int64_t blocks, const ActRow& x,
                            float* out);

// Activation conversions (llama.cpp's quantize_row_q8_1 on x86, quantize_row_q8_K_ref).
void quantize_q8_1(const float* x, int64_t cols, int8_t* q, float* d, float* s);
void quantize_q8_k(const float* x, int64_t cols, int8_t* q, float* d, int16_t* bsums);

// Per-ISA dot products; types without a SIMD kernel get the scalar one (and no
// multi-token or multi-row one: nullptr).
namespace scalar {
RowDot row_dot(TensorType type);
RowDotTokens row_dot_tokens(TensorType type);
RowDotRows row_dot_rows(TensorType type);
}  // namespace scalar
namespace avx2 {
RowDot row_dot(TensorType type);
RowDotTokens row_dot_tokens(TensorType type);
RowDotRows row_dot_rows(TensorType type);
}  // namespace avx2
namespace avx512 {
RowDot row_dot(TensorType type);
RowDotTokens row_dot_tokens(TensorType type);
RowDotRows row_dot_rows(TensorType type);
}  // namespace avx512

// Whole-row conversions for these types (the public quantize_row / dequantize_row).
void dequantize_row_blocks(TensorType type, const void* in, float* out, int64_t n);
// How the asymmetric k-quants (Q2_K, Q4_K, Q5_K) choose each group's scale and min.
// kRoundToNearest maps the group's [min(0, lo), hi] onto the levels. kSearch is llama.cpp's
// make_qkx2_quants: a grid of scales around that one, each with the importance-weighted
// least-squares scale and min for its rounding, keeping the best fit (importance as
// llama.cpp's reference quantizers: |x| plus the group's RMS for Q4_K / Q5_K, |x| for Q2_K;
// the seam where calibrated importance plugs in). Other types ignore it.
enum class ScaleSearch { kRoundToNearest, kSearch };
void quantize_row_blocks(TensorType type, const float* in, void* out, int64_t n,
                         ScaleSearch search = ScaleSearch::kSearch);

// A super-block's share of a k-quant row: weight scale dw (and dmin) from the block, the
// activation scale da, isum = sum over sub-blocks of scale * (w . q), msum = sum of
// min * (sum of q). As llama.cpp: d = da * dw, then acc += d * isum, accm += da * dmin * msum;
// the row's value is acc - accm.
inline void kquant_combine(float da, uint16_t dw, uint16_t dminw, int32_t isum, int32_t msum,
                           float& acc, float& accm) {
  acc = std::fmaf(da * fp16_to_fp32(dw), static_cast<float>(isum), acc);
  accm = std::fmaf(da * fp16_to_fp32(dminw), static_cast<float>(msum), accm);
}

}  // namespace rapide::matmul
