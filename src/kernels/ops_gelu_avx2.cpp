// GeGLU's table lookup eight at a time (AVX2 + F16C): the inputs rounded to f16 by
// vcvtps2ph (round to nearest even, as fp32_to_fp16), their bits zero-extended to gather
// indices, the 16-bit entries gathered as 32-bit words and masked (the table's extra entry
// keeps the last index's read inside), converted back, and the +-10 pass-through applied
// as the scalar twin does. Bit for bit the scalar result (kernels_ops_test).
#include <immintrin.h>

#include "kernels/ops_internal.h"

namespace rapide::ops::avx2 {

void gelu_tanh_mul(const float* gate, const float* up, int64_t n, float* out) {
  const int* table = reinterpret_cast<const int*>(gelu_f16_table());
  const __m256 lo = _mm256_set1_ps(-10.0f), hi = _mm256_set1_ps(10.0f);
  const __m256i low16 = _mm256_set1_epi32(0xFFFF);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 g = _mm256_loadu_ps(gate + i);
    const __m128i h = _mm256_cvtps_ph(g, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m256i index = _mm256_cvtepu16_epi32(h);
    // Scale 2: the gather reads table[index] and table[index + 1] as one 32-bit word.
    const __m256i words = _mm256_and_si256(_mm256_i32gather_epi32(table, index, 2), low16);
    const __m128i entries =
        _mm_packus_epi32(_mm256_castsi256_si128(words), _mm256_extracti128_si256(words, 1));
    __m256 y = _mm256_cvtph_ps(entries);
    y = _mm256_blendv_ps(y, _mm256_setzero_ps(), _mm256_cmp_ps(g, lo, _CMP_LE_OQ));
    y = _mm256_blendv_ps(y, g, _mm256_cmp_ps(g, hi, _CMP_GE_OQ));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(y, _mm256_loadu_ps(up + i)));
  }
  if (i < n) scalar::gelu_tanh_mul(gate + i, up + i, n - i, out + i);
}

}  // namespace rapide::ops::avx2
