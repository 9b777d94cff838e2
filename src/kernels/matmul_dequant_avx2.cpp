// AVX2 + FMA kernels of ActQuant::kOff: Q8_0 / Q4_0 rows to f32, and the f32 dot product
// (scalar twins: matmul_dequant.cpp).
#include <immintrin.h>

#include <cstring>

#include "base/fp16.h"
#include "kernels/matmul.h"
#include "kernels/matmul_internal.h"

namespace rapide::matmul::avx2 {

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
    const __m256 d = _mm256_set1_ps(fp16_to_fp32(d16));
    float* o = out + b * kQuantBlock;
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
      const __m256 lo = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(codes[h]));
      const __m256 hi = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(codes[h], 8)));
      _mm256_storeu_ps(o + 16 * h, _mm256_mul_ps(d, lo));
      _mm256_storeu_ps(o + 16 * h + 8, _mm256_mul_ps(d, hi));
    }
  }
}

float dot_f32(const float* w, const float* x, int64_t n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {  // two accumulators hide the FMA latency
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i), _mm256_loadu_ps(x + i), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i + 8), _mm256_loadu_ps(x + i + 8), acc1);
  }
  for (; i + 8 <= n; i += 8) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i), _mm256_loadu_ps(x + i), acc0);
  }
  const __m256 acc = _mm256_add_ps(acc0, acc1);
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  float sum = _mm_cvtss_f32(s);
  for (; i < n; ++i) sum += w[i] * x[i];
  return sum;
}

}  // namespace rapide::matmul::avx2
