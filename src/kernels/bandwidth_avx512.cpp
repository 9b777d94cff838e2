#include "kernels/avx512_common.h"
#include "kernels/bandwidth.h"

namespace rapide::bandwidth {

// Four independent accumulators so the adds never limit the load rate.
uint64_t sum_lines_avx512(const uint8_t* data, size_t lines) {
  __m512i acc[4] = {_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512(),
                    _mm512_setzero_si512()};
  size_t i = 0;
  for (; i + 4 <= lines; i += 4) {
    for (int k = 0; k < 4; ++k) {
      acc[k] = _mm512_add_epi64(acc[k], _mm512_load_si512(data + (i + k) * 64));
    }
  }
  for (; i < lines; ++i) acc[0] = _mm512_add_epi64(acc[0], _mm512_load_si512(data + i * 64));
  const __m512i total =
      _mm512_add_epi64(_mm512_add_epi64(acc[0], acc[1]), _mm512_add_epi64(acc[2], acc[3]));
  // Summed as unsigned lanes: _mm512_reduce_add_epi64 adds signed 64-bit values, and the
  // wrap-around of a checksum is then undefined behaviour (UBSan reports it).
  alignas(64) uint64_t lanes[8];
  _mm512_store_si512(lanes, total);
  uint64_t sum = 0;
  for (const uint64_t lane : lanes) sum += lane;
  return sum;
}

}  // namespace rapide::bandwidth
