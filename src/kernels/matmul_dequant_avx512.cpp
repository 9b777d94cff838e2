// AVX-512 f32 dot product for ActQuant::kOff (scalar twin: matmul_dequant.cpp).
#include "kernels/avx512_common.h"

namespace rapide::matmul::avx512 {

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
