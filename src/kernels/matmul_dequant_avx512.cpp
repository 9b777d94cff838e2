// AVX-512 kernels of ActQuant::kOff: Q8_0 / Q4_0 rows to f32, and the f32 dot product
// (scalar twins: matmul_dequant.cpp).
#include "kernels/avx512_common.h"

#include "kernels/dequant_block_codes.h"

namespace rapide::matmul::avx512 {

void dequant_row(TensorType type, const uint8_t* row, float* out, int64_t n) {
  dequant_row_with(type, row, out, n, [](float scale, const __m128i* codes, float* o) {
    const __m512 d = _mm512_set1_ps(scale);
    for (int h = 0; h < 2; ++h) {  // d * code, as the scalar loop computes it
      _mm512_storeu_ps(o + 16 * h,
                       _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(codes[h]))));
    }
  });
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
