// AVX2 twin of matmul::quantize_q8_k (kernels/rowquant.h), bit-identical to it for the
// reasons given in quantize_q8k_avx512.cpp: the same arg-max, product, rounding (MXCSR
// nearest even), clamp and d = 1 / iscale.
#include <cstring>

#include "kernels/avx2_common.h"

namespace rapide::matmul::avx2 {

namespace {
inline int hsum(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(s);
}
}  // namespace

void quantize_q8_k(const float* x, int64_t cols, int8_t* q, float* d, int16_t* bsums) {
  constexpr int kVectors = kSuperBlock / 8;
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (int64_t b = 0; b < cols / kSuperBlock; ++b) {
    const float* xb = x + b * kSuperBlock;
    int8_t* qb = q + b * kSuperBlock;
    __m256 m = _mm256_setzero_ps();
    for (int k = 0; k < kVectors; ++k) {
      m = _mm256_max_ps(m, _mm256_andnot_ps(sign, _mm256_loadu_ps(xb + 8 * k)));
    }
    const float amax = hmax_ps(m);
    if (amax == 0.0f) {
      d[b] = 0.0f;
      std::memset(qb, 0, kSuperBlock);
      std::memset(bsums + b * 16, 0, 16 * sizeof(int16_t));
      continue;
    }
    // The signed value at the first position of largest magnitude.
    float max = 0.0f;
    const __m256 am = _mm256_set1_ps(amax);
    for (int k = 0; k < kVectors; ++k) {
      const __m256 a = _mm256_andnot_ps(sign, _mm256_loadu_ps(xb + 8 * k));
      const int hit = _mm256_movemask_ps(_mm256_cmp_ps(a, am, _CMP_EQ_OQ));
      if (hit != 0) {
        max = xb[8 * k + __builtin_ctz(static_cast<unsigned>(hit))];
        break;
      }
    }
    const float iscale = -127.0f / max;
    const __m256 is = _mm256_set1_ps(iscale);
    const __m256i top = _mm256_set1_epi32(127);
    // 32 values (4 vectors) per step: two 16-value bsums, one 32-byte store.
    for (int k = 0; k < kVectors; k += 4) {
      __m256i qi[4];
      for (int j = 0; j < 4; ++j) {
        qi[j] = _mm256_min_epi32(
            _mm256_cvtps_epi32(_mm256_mul_ps(is, _mm256_loadu_ps(xb + 8 * (k + j)))), top);
      }
      bsums[b * 16 + k / 2] = static_cast<int16_t>(hsum(_mm256_add_epi32(qi[0], qi[1])));
      bsums[b * 16 + k / 2 + 1] = static_cast<int16_t>(hsum(_mm256_add_epi32(qi[2], qi[3])));
      // The packs work within 128-bit lanes; the permute restores element order.
      const __m256i p01 = _mm256_packs_epi32(qi[0], qi[1]);
      const __m256i p23 = _mm256_packs_epi32(qi[2], qi[3]);
      const __m256i bytes = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(p01, p23),
                                                        _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(qb + 8 * k), bytes);
    }
    d[b] = 1.0f / iscale;
  }
}

}  // namespace rapide::matmul::avx2
