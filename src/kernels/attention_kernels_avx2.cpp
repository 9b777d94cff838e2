// AVX2 + FMA + F16C attention kernel: 8 positions per score tile (head_dim % 8 == 0).
#include <immintrin.h>

#include <cstring>

#include "kernels/attention_simd.h"

namespace rapide {

namespace {

struct Avx2 {
  using V = __m256;
  static constexpr int kLanes = 8;
  // 16 ymm registers: NQ x CV accumulators plus CV value rows must fit.
  static constexpr int value_vectors(int nq) { return nq <= 2 ? 4 : 2; }

  static V zero() { return _mm256_setzero_ps(); }
  static V set1(float x) { return _mm256_set1_ps(x); }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static V fmadd(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V sub(V a, V b) { return _mm256_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V max(V a, V b) { return _mm256_max_ps(a, b); }
  static float reduce_add(V v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  static float reduce_max(V v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  // exp(x) for x <= 0: x = n ln2 + r, |r| <= ln2/2, exp(r) by its degree-7 Taylor
  // polynomial (error < 1e-8 relative), 2^n built in the exponent bits. Below -87 the
  // result is ~1e-38, which no softmax can tell from 0.
  static V exp(V x) {
    x = _mm256_max_ps(x, _mm256_set1_ps(-87.0f));
    const V n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    V r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.42860682030941723212e-6f), r);
    V p = _mm256_set1_ps(1.0f / 5040.0f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    const __m256i bits =
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
  }
  static V round_f16(V v) { return _mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT)); }
  static V keep_first(V v, int count, float fill) {
    const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256 keep = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(count), lanes));
    return _mm256_blendv_ps(_mm256_set1_ps(fill), v, keep);
  }
  static V load_f16(const uint16_t* p, int count) {
    if (count == kLanes)
      return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    alignas(16) uint16_t tail[kLanes] = {};
    std::memcpy(tail, p, sizeof(uint16_t) * count);
    return _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(tail)));
  }
  static V load_f32(const float* p, int count) {
    if (count == kLanes) return _mm256_loadu_ps(p);
    alignas(32) float tail[kLanes] = {};
    std::memcpy(tail, p, sizeof(float) * count);
    return _mm256_load_ps(tail);
  }
  // Without VNNI: codes widened to 16 bits and vpmaddwd against the query's 4 codes (also
  // widened), exact in 32 bits. `lo` collects keys 0-3 and `hi` keys 4-7, two 32-bit
  // partial sums per key, folded by one horizontal add and a permute per group.
  template <int NQ>
  static void madd_word_row(__m256i k, const int8_t* const* q, int i, __m256i* lo, __m256i* hi) {
    const __m256i k_lo = _mm256_cvtepu8_epi16(_mm256_castsi256_si128(k));
    const __m256i k_hi = _mm256_cvtepu8_epi16(_mm256_extracti128_si256(k, 1));
    for (int j = 0; j < NQ; ++j) {
      int32_t word;
      std::memcpy(&word, q[j] + i, sizeof(word));
      const __m256i qv = _mm256_broadcastq_epi64(_mm_cvtepi8_epi16(_mm_cvtsi32_si128(word)));
      lo[j] = _mm256_add_epi32(lo[j], _mm256_madd_epi16(k_lo, qv));
      hi[j] = _mm256_add_epi32(hi[j], _mm256_madd_epi16(k_hi, qv));
    }
  }
  template <bool kQ4, int NQ>
  static void dot_group(const uint8_t* codes, size_t word_row, const int8_t* const* q, int n,
                        int count, V* out) {
    __m256i lo[NQ], hi[NQ];
    for (int j = 0; j < NQ; ++j) lo[j] = hi[j] = _mm256_setzero_si256();
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    for (int i = 0; i < n; i += kQ4 ? 8 : 4, codes += word_row) {
      __m256i k;
      if (count == kLanes) {
        k = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes));
      } else {
        alignas(32) uint8_t tail[4 * kLanes] = {};
        std::memcpy(tail, codes, 4 * static_cast<size_t>(count));
        k = _mm256_load_si256(reinterpret_cast<const __m256i*>(tail));
      }
      if constexpr (kQ4) {
        madd_word_row<NQ>(_mm256_and_si256(k, low4), q, i, lo, hi);
        madd_word_row<NQ>(_mm256_and_si256(_mm256_srli_epi16(k, 4), low4), q, i + 4, lo, hi);
      } else {
        madd_word_row<NQ>(k, q, i, lo, hi);
      }
    }
    const __m256i order = _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7);
    for (int j = 0; j < NQ; ++j) {
      const __m256i sums = _mm256_permutevar8x32_epi32(_mm256_hadd_epi32(lo[j], hi[j]), order);
      out[j] = _mm256_cvtepi32_ps(sums);
    }
  }
  // Integer P·V: one 32-bit lane per dimension holds the 4 positions of a quad.
  using VI = __m256i;
  static VI zero_i() { return _mm256_setzero_si256(); }
  template <bool kQ4>
  static VI load_value_quad(const uint8_t* quad, int dim) {
    if constexpr (kQ4) {
      // Half of a 16-dim chunk (32 bytes): low nibbles are dims 0..7, high nibbles 8..15.
      __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(quad + dim / 16 * 32));
      if (dim % 16 != 0) bytes = _mm256_srli_epi16(bytes, 4);
      return _mm256_and_si256(bytes, _mm256_set1_epi8(0x0F));
    } else {
      // code - 128 as a signed byte is code ^ 0x80.
      return _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(quad + dim * 4)),
                              _mm256_set1_epi8(-128));
    }
  }
  // vpdpbusd without VNNI: vpmaddubsw's 16-bit pair sums cannot saturate (weights |w| <= 127,
  // codes |c| <= 127 for q8_0, <= 15 for q4_0), then vpmaddwd adds the pairs.
  template <bool kQ4>
  static VI dot_quad(VI acc, VI codes, const int8_t* weights) {
    int32_t word;
    std::memcpy(&word, weights, sizeof(word));
    const __m256i w = _mm256_set1_epi32(word);
    const __m256i pairs = kQ4 ? _mm256_maddubs_epi16(codes, w) : _mm256_maddubs_epi16(w, codes);
    return _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
  }
  static V to_float(VI acc, int32_t offset) {
    return _mm256_cvtepi32_ps(_mm256_sub_epi32(acc, _mm256_set1_epi32(offset)));
  }
  static V abs(V v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }
  static VI add_i(VI a, VI b) { return _mm256_add_epi32(a, b); }
  static VI round_to_int(V x) { return _mm256_cvtps_epi32(x); }
  static void store_weights(int8_t* dst, VI codes) {
    const __m128i words =
        _mm_packs_epi32(_mm256_castsi256_si128(codes), _mm256_extracti128_si256(codes, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(dst), _mm_packs_epi16(words, words));
  }
  static int32_t reduce_add_i(VI v) {
    __m128i sum = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    sum = _mm_hadd_epi32(sum, sum);
    sum = _mm_hadd_epi32(sum, sum);
    return _mm_cvtsi128_si32(sum);
  }
  // The scalar quantizer: its cost matters only next to the AVX-512 kernels' arithmetic.
  static void quantize_query(const KvLayout& layout, const float* x, QuantizedQuery& out) {
    rapide::quantize_query(layout, x, out);
  }
};

}  // namespace

void attend_job_avx2(const AttentionJob& job) {
  attention_simd::attend_job_dispatch<Avx2, 4>(job);
}

}  // namespace rapide
