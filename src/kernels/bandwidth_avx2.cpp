#include <immintrin.h>

#include "kernels/bandwidth.h"

namespace rapide::bandwidth {

// Four independent accumulators, two loads per 64-byte line.
uint64_t sum_lines_avx2(const uint8_t* data, size_t lines) {
  __m256i acc[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(),
                    _mm256_setzero_si256()};
  size_t i = 0;
  for (; i + 2 <= lines; i += 2) {
    for (int k = 0; k < 4; ++k) {
      acc[k] = _mm256_add_epi64(
          acc[k], _mm256_load_si256(reinterpret_cast<const __m256i*>(data + i * 64 + k * 32)));
    }
  }
  for (; i < lines; ++i) {
    acc[0] = _mm256_add_epi64(acc[0],
                              _mm256_load_si256(reinterpret_cast<const __m256i*>(data + i * 64)));
    acc[1] = _mm256_add_epi64(
        acc[1], _mm256_load_si256(reinterpret_cast<const __m256i*>(data + i * 64 + 32)));
  }
  const __m256i total =
      _mm256_add_epi64(_mm256_add_epi64(acc[0], acc[1]), _mm256_add_epi64(acc[2], acc[3]));
  alignas(32) uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), total);
  return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}

}  // namespace rapide::bandwidth
