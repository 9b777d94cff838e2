// AVX-512 twin of matmul::quantize_q8_k (kernels/rowquant.h): the Q8_K activations every
// k-quant and IQ4_XS matrix multiplies against, converted once per matrix per token. The
// scalar loop (a branchy arg-max, nearbyintf per element) took ~0.8 us for 768 columns,
// about a fifth of a small decode matmul on 2 threads (Zen 5: 128 KiB Q4_K matrix, 3.9 us).
//
// Bit-identical to the scalar reference: the same arg-max (the first element of largest
// |x|), the same float product iscale * x rounded to nearest even (the default MXCSR mode,
// as nearbyintf), the same clamp at 127, and d = 1 / iscale.
#include <cstring>

#include "kernels/avx512_common.h"
#include "kernels/matmul_internal.h"

namespace rapide::matmul::avx512 {

void quantize_q8_k(const float* x, int64_t cols, int8_t* q, float* d, int16_t* bsums) {
  constexpr int kVectors = kSuperBlock / 16;
  for (int64_t b = 0; b < cols / kSuperBlock; ++b) {
    const float* xb = x + b * kSuperBlock;
    int8_t* qb = q + b * kSuperBlock;
    __m512 v[kVectors];
    __m512 m = _mm512_setzero_ps();
    for (int k = 0; k < kVectors; ++k) {
      v[k] = _mm512_loadu_ps(xb + 16 * k);
      m = _mm512_max_ps(m, _mm512_abs_ps(v[k]));
    }
    const float amax = _mm512_reduce_max_ps(m);
    if (amax == 0.0f) {
      d[b] = 0.0f;
      std::memset(qb, 0, kSuperBlock);
      std::memset(bsums + b * 16, 0, 16 * sizeof(int16_t));
      continue;
    }
    // The signed value at the first position of largest magnitude.
    float max = 0.0f;
    const __m512 am = _mm512_set1_ps(amax);
    for (int k = 0; k < kVectors; ++k) {
      const __mmask16 hit = _mm512_cmp_ps_mask(_mm512_abs_ps(v[k]), am, _CMP_EQ_OQ);
      if (hit != 0) {
        max = xb[16 * k + __builtin_ctz(hit)];
        break;
      }
    }
    const float iscale = -127.0f / max;
    const __m512 is = _mm512_set1_ps(iscale);
    const __m512i top = _mm512_set1_epi32(127);
    for (int k = 0; k < kVectors; ++k) {
      const __m512i qi = _mm512_min_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(is, v[k])), top);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(qb + 16 * k), _mm512_cvtepi32_epi8(qi));
      bsums[b * 16 + k] = static_cast<int16_t>(_mm512_reduce_add_epi32(qi));
    }
    d[b] = 1.0f / iscale;
  }
}

}  // namespace rapide::matmul::avx512
