// AVX-512 attention kernel: 16 positions per score tile (head_dim % 16 == 0); partial
// tiles use masked loads (AVX-512 BW/VL for the 16-bit keys).
#include <cstring>

#include "kernels/attention_simd.h"
#include "kernels/avx512_common.h"

namespace rapide {

namespace {

struct Avx512 {
  using V = __m512;
  static constexpr int kLanes = 16;
  // 32 zmm registers: NQ x CV accumulators plus CV value rows must fit.
  static constexpr int value_vectors(int nq) { return nq <= 6 ? 4 : 2; }

  static V zero() { return _mm512_setzero_ps(); }
  static V set1(float x) { return _mm512_set1_ps(x); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static V fmadd(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static V sub(V a, V b) { return _mm512_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static V max(V a, V b) { return _mm512_max_ps(a, b); }
  static float reduce_add(V v) { return _mm512_reduce_add_ps(v); }
  static float reduce_max(V v) { return _mm512_reduce_max_ps(v); }
  // exp(x) for x <= 0, as in the AVX2 kernel; vscalefps applies 2^n.
  static V exp(V x) {
    x = _mm512_max_ps(x, _mm512_set1_ps(-87.0f));
    const V n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    V r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.42860682030941723212e-6f), r);
    V p = _mm512_set1_ps(1.0f / 5040.0f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
  }
  static V round_f16(V v) {
    return _mm512_cvtph_ps(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  static __mmask16 first(int count) { return static_cast<__mmask16>((1u << count) - 1u); }
  static V keep_first(V v, int count, float fill) {
    return _mm512_mask_blend_ps(first(count), _mm512_set1_ps(fill), v);
  }
  static V load_f16(const uint16_t* p, int count) {
    if (count == kLanes)
      return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(first(count), p));
  }
  static V load_f32(const float* p, int count) {
    if (count == kLanes) return _mm512_loadu_ps(p);
    return _mm512_maskz_loadu_ps(first(count), p);
  }
  static __m512i broadcast_word(const int8_t* q) {
    int32_t word;
    std::memcpy(&word, q, sizeof(word));
    return _mm512_set1_epi32(word);
  }
  // vpdpbusd: 16 keys x 4 dimensions per 64-byte load, one 32-bit sum per key.
  template <bool kQ4, int NQ>
  static void dot_group(const uint8_t* codes, size_t word_row, const int8_t* const* q, int n,
                        int count, V* out) {
    __m512i acc[NQ];
    for (int j = 0; j < NQ; ++j) acc[j] = _mm512_setzero_si512();
    const __mmask64 mask = count == kLanes ? ~0ULL : (1ULL << (4 * count)) - 1;
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    for (int i = 0; i < n; i += kQ4 ? 8 : 4, codes += word_row) {
      const __m512i k = _mm512_maskz_loadu_epi8(mask, codes);
      if constexpr (kQ4) {
        const __m512i lo = _mm512_and_si512(k, low4);
        const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(k, 4), low4);
        for (int j = 0; j < NQ; ++j) {
          acc[j] = _mm512_dpbusd_epi32(acc[j], lo, broadcast_word(q[j] + i));
          acc[j] = _mm512_dpbusd_epi32(acc[j], hi, broadcast_word(q[j] + i + 4));
        }
      } else {
        for (int j = 0; j < NQ; ++j)
          acc[j] = _mm512_dpbusd_epi32(acc[j], k, broadcast_word(q[j] + i));
      }
    }
    for (int j = 0; j < NQ; ++j) out[j] = _mm512_cvtepi32_ps(acc[j]);
  }
  // Integer P·V: one 32-bit lane per dimension holds the 4 positions of a quad.
  using VI = __m512i;
  static VI zero_i() { return _mm512_setzero_si512(); }
  template <bool kQ4>
  static VI load_value_quad(const uint8_t* quad, int dim) {
    if constexpr (kQ4) {
      // One 16-dim chunk (32 bytes): low nibbles dims 0..7, high nibbles dims 8..15.
      const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(quad + dim * 2));
      const __m256i low4 = _mm256_set1_epi8(0x0F);
      const __m256i lo = _mm256_and_si256(bytes, low4);
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(bytes, 4), low4);
      return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
    } else {
      // code - 128 as a signed byte is code ^ 0x80.
      return _mm512_xor_si512(_mm512_loadu_si512(quad + dim * 4), _mm512_set1_epi8(-128));
    }
  }
  template <bool kQ4>
  static VI dot_quad(VI acc, VI codes, const int8_t* weights) {
    int32_t word;
    std::memcpy(&word, weights, sizeof(word));
    const __m512i w = _mm512_set1_epi32(word);
    // vpdpbusd's first operand is unsigned: q4_0's nibbles, q8_0's non-negative weights.
    return kQ4 ? _mm512_dpbusd_epi32(acc, codes, w) : _mm512_dpbusd_epi32(acc, w, codes);
  }
  static V to_float(VI acc, int32_t offset) {
    return _mm512_cvtepi32_ps(_mm512_sub_epi32(acc, _mm512_set1_epi32(offset)));
  }
  static V abs(V v) { return _mm512_abs_ps(v); }
  static VI add_i(VI a, VI b) { return _mm512_add_epi32(a, b); }
  static VI round_to_int(V x) { return _mm512_cvtps_epi32(x); }
  static void store_weights(int8_t* dst, VI codes) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), _mm512_cvtepi32_epi8(codes));
  }
  static int32_t reduce_add_i(VI v) { return _mm512_reduce_add_epi32(v); }
  static void quantize_query(const KvLayout& layout, const float* x, QuantizedQuery& out) {
    quantize_query_avx512(layout, x, out);
  }
};

}  // namespace

void attend_job_avx512(const AttentionJob& job) {
  attention_simd::attend_job_dispatch<Avx512, 12>(job);
}

}  // namespace rapide
