// Shared by matmul_dequant_avx2.cpp and matmul_dequant_avx512.cpp (SSE code both ISAs run):
// a Q8_0 or Q4_0 block's scale and its 32 signed integer codes, 16 per vector, and the loop
// over a row's blocks. Internal
// linkage (anonymous namespace): each ISA's file keeps its own copy, compiled with its flags.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "base/fp16.h"
#include "kernels/matmul.h"

namespace rapide::matmul {
namespace {

// codes[0] holds cols 0..15, codes[1] cols 16..31; the weights are d * code.
inline float block_codes(const uint8_t* block, bool q8, __m128i codes[2]) {
  uint16_t d16;
  std::memcpy(&d16, block, 2);
  if (q8) {
    codes[0] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 2));
    codes[1] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 18));
  } else {  // byte j: col j in the low nibble, col j + 16 in the high one, both + 8
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 2));
    const __m128i low_nibbles = _mm_set1_epi8(0x0f), eight = _mm_set1_epi8(8);
    codes[0] = _mm_sub_epi8(_mm_and_si128(bytes, low_nibbles), eight);
    codes[1] = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(bytes, 4), low_nibbles), eight);
  }
  return fp16_to_fp32(d16);
}

// A row of `type` to f32: Q8_0 / Q4_0 blocks through store(d, codes, out) (the ISA's
// vectors), any other type through the scalar dequantize_row.
template <typename StoreBlock>
void dequant_row_with(TensorType type, const uint8_t* row, float* out, int64_t n,
                      StoreBlock store) {
  if (type != TensorType::kQ8_0 && type != TensorType::kQ4_0) {
    return dequantize_row(type, row, out, n);
  }
  const bool q8 = type == TensorType::kQ8_0;
  const int64_t block_bytes = q8 ? sizeof(BlockQ8_0) : sizeof(BlockQ4_0);
  for (int64_t b = 0; b < n / kQuantBlock; ++b) {
    __m128i codes[2];
    const float d = block_codes(row + b * block_bytes, q8, codes);
    store(d, codes, out + b * kQuantBlock);
  }
}

}  // namespace
}  // namespace rapide::matmul
