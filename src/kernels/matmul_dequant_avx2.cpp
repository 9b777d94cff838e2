// AVX2 + FMA kernels of ActQuant::kOff: Q8_0 / Q4_0 rows to f32, and the f32 dot product
// (scalar twins: matmul_dequant.cpp).
#include <immintrin.h>

#include "kernels/dequant_block_codes.h"
#include "kernels/matmul_internal.h"

namespace rapide::matmul::avx2 {

void dequant_row(TensorType type, const uint8_t* row, float* out, int64_t n) {
  dequant_row_with(type, row, out, n, [](float scale, const __m128i* codes, float* o) {
    const __m256 d = _mm256_set1_ps(scale);
    for (int h = 0; h < 2; ++h) {  // d * code, as the scalar loop computes it
      const __m256 lo = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(codes[h]));
      const __m256 hi = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(codes[h], 8)));
      _mm256_storeu_ps(o + 16 * h, _mm256_mul_ps(d, lo));
      _mm256_storeu_ps(o + 16 * h + 8, _mm256_mul_ps(d, hi));
    }
  });
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
