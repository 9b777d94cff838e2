// Shared by the *_avx2.cpp kernel files (and only them: it emits AVX2 code).
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/matmul_internal.h"

namespace rapide::matmul::avx2 {
namespace {

// 4 activation bytes broadcast to every 32-bit lane.
inline __m256i broadcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// The largest of 8 floats.
inline float hmax_ps(__m256 m) {
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
  return _mm_cvtss_f32(m4);
}

// Stores half h (8 rows) of panel p for token t, only the valid rows in the last panel.
inline void store_half(float* y, int64_t rows, int64_t p, int h, int64_t t, uint32_t mask,
                       __m256 v) {
  float* dst = y + t * rows + p * kPanel + h * 8;
  const uint32_t m = (mask >> (h * 8)) & 0xff;
  if (m == 0xff) {
    _mm256_storeu_ps(dst, v);
  } else if (m != 0) {
    alignas(32) float tmp[8];
    _mm256_store_ps(tmp, v);
    for (int j = 0; j < 8; ++j) {
      if (m & (1u << j)) dst[j] = tmp[j];
    }
  }
}

}  // namespace
}  // namespace rapide::matmul::avx2
