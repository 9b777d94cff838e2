// AVX-512 VNNI dot products of the Q4_K_M pair (Q4_K and Q6_K) with Q8_K activations.
// vpdpbusd sums 4 byte products per 32-bit lane without the 16-bit intermediate of the
// AVX2 path; per sub-block scales are then applied in 32-bit lanes. The integers are exact
// and combined as the scalar reference combines them (kquant_combine): bit-identical
// results. The other row-wise types run their scalar kernel at this level.
#include <immintrin.h>

#include "kernels/rowquant.h"

namespace rapide::matmul::avx512 {
namespace {

int32_t hsum(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

// Lanes 0-3 of a vpdpbusd over 32 bytes hold bytes 0-15 (one 16-weight sub-block), lanes
// 4-7 bytes 16-31 (the next).
inline __m256i scaled(__m256i w, __m256i a, int s_lo, int s_hi) {
  const __m256i dot = _mm256_dpbusd_epi32(_mm256_setzero_si256(), w, a);
  return _mm256_mullo_epi32(dot, _mm256_set_m128i(_mm_set1_epi32(s_hi), _mm_set1_epi32(s_lo)));
}

float dot_q4_k(const uint8_t* row, int64_t blocks, const ActRow& x) {
  const __m256i m4 = _mm256_set1_epi8(0x0f);
  float acc = 0.0f, accm = 0.0f;
  for (int64_t i = 0; i < blocks; ++i) {
    const auto* b = reinterpret_cast<const BlockQ4K*>(row + i * sizeof(BlockQ4K));
    const int8_t* q = x.q + i * kSuperBlock;
    const int16_t* bsums = x.bsums + i * 16;
    int sc[8], mn[8];
    int32_t msum = 0;
    for (int j = 0; j < 8; ++j) {
      kquant_scale_min(j, b->scales, &sc[j], &mn[j]);
      msum += mn[j] * (bsums[2 * j] + bsums[2 * j + 1]);
    }
    __m256i sumi = _mm256_setzero_si256();
    for (int k = 0; k < 4; ++k) {
      const __m256i qs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->qs + 32 * k));
      const __m256i lo = _mm256_and_si256(qs, m4);
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(qs, 4), m4);
      const __m256i a0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 64 * k));
      const __m256i a1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 64 * k + 32));
      sumi = _mm256_add_epi32(sumi, scaled(lo, a0, sc[2 * k], sc[2 * k]));
      sumi = _mm256_add_epi32(sumi, scaled(hi, a1, sc[2 * k + 1], sc[2 * k + 1]));
    }
    kquant_combine(x.d[i], b->d, b->dmin, hsum(sumi), msum, acc, accm);
  }
  return acc - accm;
}

// Unsigned weights 0..63, the -32 offset applied through bsums (see the AVX2 twin).
float dot_q6_k(const uint8_t* row, int64_t blocks, const ActRow& x) {
  const __m256i m4 = _mm256_set1_epi8(0x0f);
  const __m256i m3 = _mm256_set1_epi8(0x03);
  float acc = 0.0f, accm = 0.0f;
  for (int64_t i = 0; i < blocks; ++i) {
    const auto* b = reinterpret_cast<const BlockQ6K*>(row + i * sizeof(BlockQ6K));
    const int8_t* q = x.q + i * kSuperBlock;
    const int16_t* bsums = x.bsums + i * 16;
    int32_t offset = 0;
    for (int j = 0; j < 16; ++j) offset += b->scales[j] * bsums[j];
    __m256i sumi = _mm256_setzero_si256();
    for (int n = 0; n < 2; ++n) {
      const __m256i ql0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->ql + 64 * n));
      const __m256i ql1 =
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->ql + 64 * n + 32));
      const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->qh + 32 * n));
      for (int k = 0; k < 4; ++k) {
        const __m256i l = k & 1 ? ql1 : ql0;
        const __m256i low = k < 2 ? _mm256_and_si256(l, m4)
                                  : _mm256_and_si256(_mm256_srli_epi16(l, 4), m4);
        const __m256i high = _mm256_slli_epi16(
            _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * k)), m3), 4);
        const __m256i w = _mm256_or_si256(low, high);
        const __m256i a =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 128 * n + 32 * k));
        const int s = 8 * n + 2 * k;
        sumi = _mm256_add_epi32(sumi, scaled(w, a, b->scales[s], b->scales[s + 1]));
      }
    }
    kquant_combine(x.d[i], b->d, 0, hsum(sumi) - 32 * offset, 0, acc, accm);
  }
  return acc - accm;
}

}  // namespace

RowDot row_dot(TensorType type) {
  switch (type) {
    case TensorType::kQ4_K:
      return dot_q4_k;
    case TensorType::kQ6_K:
      return dot_q6_k;
    default:
      return scalar::row_dot(type);
  }
}

}  // namespace rapide::matmul::avx512
