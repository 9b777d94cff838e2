// Shared by the *_avx512.cpp kernel files (and only them: it emits AVX-512 code).
#pragma once

// GCC 12 reports -Wmaybe-uninitialized inside its own avx512fintrin.h wherever an intrinsic
// built on _mm512_undefined_*() (deliberately uninitialised) is inlined: a false positive.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/matmul_internal.h"

namespace rapide::matmul::avx512 {
namespace {

// 4 activation bytes broadcast to every 32-bit lane: vpdpbusd's signed operand.
inline __m512i broadcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// Stores the 16 rows of panel p for token t, only the valid ones in the last panel.
inline void store_tile(float* y, int64_t rows, int64_t p, int64_t t, uint32_t mask, __m512 v) {
  float* dst = y + t * rows + p * kPanel;
  if (mask == 0xffffu) {
    _mm512_storeu_ps(dst, v);
  } else {
    _mm512_mask_storeu_ps(dst, static_cast<__mmask16>(mask), v);
  }
}

}  // namespace
}  // namespace rapide::matmul::avx512
