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
