// AVX2 + F16C attention kernel: 8 lanes per step (head_dim is a multiple of 8 in every
// Llama-family model; a scalar tail handles the rest).
#include <immintrin.h>

#include "base/fp16.h"
#include "model/attention_kernel.h"

namespace rapide {

namespace {

inline float horizontal_sum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

struct Avx2Ops {
  static float dot(const float* q, const uint8_t* row, int d, KvType type) {
    __m256 acc = _mm256_setzero_ps();
    int i = 0;
    float tail = 0.0f;
    if (type == KvType::kF32) {
      const auto* k = reinterpret_cast<const float*>(row);
      for (; i + 8 <= d; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), _mm256_loadu_ps(k + i), acc);
      for (; i < d; ++i) tail += q[i] * k[i];
    } else {
      const auto* k = reinterpret_cast<const uint16_t*>(row);
      for (; i + 8 <= d; i += 8) {
        __m256 kv = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(k + i)));
        acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), kv, acc);
      }
      for (; i < d; ++i) tail += q[i] * fp16_to_fp32(k[i]);
    }
    return horizontal_sum(acc) + tail;
  }
  static void axpy(float a, const uint8_t* row, float* out, int d, KvType type) {
    const __m256 va = _mm256_set1_ps(a);
    int i = 0;
    if (type == KvType::kF32) {
      const auto* v = reinterpret_cast<const float*>(row);
      for (; i + 8 <= d; i += 8) {
        _mm256_storeu_ps(out + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(v + i), _mm256_loadu_ps(out + i)));
      }
      for (; i < d; ++i) out[i] += a * v[i];
    } else {
      const auto* v = reinterpret_cast<const uint16_t*>(row);
      for (; i + 8 <= d; i += 8) {
        __m256 vv = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(v + i)));
        _mm256_storeu_ps(out + i, _mm256_fmadd_ps(va, vv, _mm256_loadu_ps(out + i)));
      }
      for (; i < d; ++i) out[i] += a * fp16_to_fp32(v[i]);
    }
  }
};

}  // namespace

void attend_query_avx2(const AttentionQuery& job) { attend_query_impl<Avx2Ops>(job); }

}  // namespace rapide
