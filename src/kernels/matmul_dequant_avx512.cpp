// AVX-512 kernels of ActQuant::kOff: Q8_0 / Q4_0 rows to f32, and the f32 dot product
// (scalar twins: matmul_dequant.cpp).
#include "kernels/avx512_common.h"

#include <cstring>

#include "base/fp16.h"
#include "kernels/matmul.h"

namespace rapide::matmul::avx512 {

void dequant_row(TensorType type, const uint8_t* row, float* out, int64_t n) {
  if (type != TensorType::kQ8_0 && type != TensorType::kQ4_0) {
    return dequantize_row(type, row, out, n);
  }
  const bool q8 = type == TensorType::kQ8_0;
  const int64_t block_bytes = q8 ? sizeof(BlockQ8_0) : sizeof(BlockQ4_0);
  const __m128i low_nibbles = _mm_set1_epi8(0x0f), eight = _mm_set1_epi8(8);
  for (int64_t b = 0; b < n / kQuantBlock; ++b) {
    const uint8_t* block = row + b * block_bytes;
    uint16_t d16;
    std::memcpy(&d16, block, 2);
    const __m512 d = _mm512_set1_ps(fp16_to_fp32(d16));
    // The signed integer codes of the block's 32 weights, 16 per vector (cols 0..15, 16..31).
    __m128i codes[2];
    if (q8) {
      codes[0] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 2));
      codes[1] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 18));
    } else {
      const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 2));
      codes[0] = _mm_sub_epi8(_mm_and_si128(bytes, low_nibbles), eight);
      codes[1] = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(bytes, 4), low_nibbles), eight);
    }
    for (int h = 0; h < 2; ++h) {  // d * code, as the scalar loop computes it
      const __m512 v = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(codes[h]));
      _mm512_storeu_ps(out + b * kQuantBlock + 16 * h, _mm512_mul_ps(d, v));
    }
  }
}

float dot_f32(const float* w, const float* x, int64_t n) {
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {  // two accumulators hide the FMA latency
    acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(w + i), _mm512_loadu_ps(x + i), acc0);
    acc1 = _mm512_fmadd_ps(_mm512_loadu_ps(w + i + 16), _mm512_loadu_ps(x + i + 16), acc1);
  }
  if (i + 16 <= n) {
    acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(w + i), _mm512_loadu_ps(x + i), acc0);
    i += 16;
  }
  if (i < n) {  // the tail through a mask: no scalar loop
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    acc1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, w + i), _mm512_maskz_loadu_ps(m, x + i), acc1);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
}

}  // namespace rapide::matmul::avx512
