// The Q4_K and Q6_K dot products against Q8_K activations, shared by the AVX2 and AVX-512
// kernel files (compiled with each file's flags; the anonymous namespace keeps the two
// instantiations apart). Included only by rowquant_dot_avx2.cpp / rowquant_dot_avx512.cpp.
//
// One call takes one weight row and T tokens: each super-block's weights are unpacked into
// registers once and reused for every token (prefill), T = 1 serves decode. Sub-block
// scales are unpacked with integer ops and broadcast with byte shuffles; vpmaddubsw
// products (|w| <= 63, |q| <= 127: no saturation) are scaled and summed in 32 bits with
// vpmaddwd (AVX2) or vpdpwssd (AVX-512 VNNI). The integers equal the scalar reference's,
// and they are combined into floats with the same operations (kquant_combine; F16C gives
// the same f32 as fp16_to_fp32), so every variant reproduces the reference bit for bit.
#pragma once

#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "kernels/rowquant.h"

namespace rapide::matmul {
namespace {

inline __m256i madd_acc(__m256i acc, __m256i p16, __m256i scales16) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
  return _mm256_dpwssd_epi32(acc, p16, scales16);
#else
  return _mm256_add_epi32(acc, _mm256_madd_epi16(p16, scales16));
#endif
}

// The sums of the 8 lanes of a and of b.
inline void hsum2(__m256i a, __m256i b, int32_t& ra, int32_t& rb) {
  const __m256i h = _mm256_hadd_epi32(a, b);  // a01 a23 b01 b23 | a45 a67 b45 b67
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
  s = _mm_hadd_epi32(s, s);  // a b a b
  ra = _mm_cvtsi128_si32(s);
  rb = _mm_extract_epi32(s, 1);
}

inline void combine(float da, float dw, float dminw, int32_t isum, int32_t msum, float& acc,
                    float& accm) {
  acc = std::fmaf(da * dw, static_cast<float>(isum), acc);
  accm = std::fmaf(da * dminw, static_cast<float>(msum), accm);
}

inline __m256i load256(const void* p) {
  return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}

// A vector whose low 8 int16 lanes are lane lo of src's low half and whose high 8 are lane
// hi of its high half.
inline __m256i broadcast_lanes(__m256i src, int lo, int hi) {
  const __m256i mask = _mm256_set_m128i(_mm_set1_epi16(static_cast<int16_t>(0x0100 + 0x0202 * hi)),
                                        _mm_set1_epi16(static_cast<int16_t>(0x0100 + 0x0202 * lo)));
  return _mm256_shuffle_epi8(src, mask);
}

template <int T>
void q4_k_tokens(const uint8_t* row, int64_t blocks, const ActRow* xs, float* out) {
  const __m256i m4 = _mm256_set1_epi8(0x0f);
  float acc[T] = {}, accm[T] = {};
  for (int64_t i = 0; i < blocks; ++i) {
    const auto* b = reinterpret_cast<const BlockQ4K*>(row + i * sizeof(BlockQ4K));
    // kquant_scale_min for all 8 sub-blocks at once: scales to bytes 0-7, mins to 8-15.
    uint32_t u[4];
    std::memcpy(u, b->scales, 12);
    constexpr uint32_t k6 = 0x3f3f3f3f, k4 = 0x0f0f0f0f, k2 = 0x03030303;
    u[3] = ((u[2] >> 4) & k4) | (((u[1] >> 6) & k2) << 4);
    const uint32_t mins_lo = u[1] & k6;
    u[1] = (u[2] & k4) | (((u[0] >> 6) & k2) << 4);
    u[2] = mins_lo;
    u[0] &= k6;
    const __m128i sm = _mm_set_epi32(static_cast<int>(u[3]), static_cast<int>(u[2]),
                                     static_cast<int>(u[1]), static_cast<int>(u[0]));
    const __m256i scales = _mm256_permute4x64_epi64(_mm256_cvtepu8_epi16(sm), 0x44);
    const __m256i mins = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(sm, sm));  // m0 m0 m1 m1 ...
    __m256i w[8], s[8];
    for (int k = 0; k < 4; ++k) {
      const __m256i qs = load256(b->qs + 32 * k);
      w[2 * k] = _mm256_and_si256(qs, m4);
      w[2 * k + 1] = _mm256_and_si256(_mm256_srli_epi16(qs, 4), m4);
    }
    for (int j = 0; j < 8; ++j) s[j] = broadcast_lanes(scales, j, j);
    const float dw = _cvtsh_ss(b->d), dminw = _cvtsh_ss(b->dmin);
    for (int t = 0; t < T; ++t) {
      const int8_t* q = xs[t].q + i * kSuperBlock;
      __m256i isum = _mm256_setzero_si256();
      for (int j = 0; j < 8; ++j) {
        isum = madd_acc(isum, _mm256_maddubs_epi16(w[j], load256(q + 32 * j)), s[j]);
      }
      const __m256i msum = _mm256_madd_epi16(load256(xs[t].bsums + i * 16), mins);
      int32_t is, ms;
      hsum2(isum, msum, is, ms);
      combine(xs[t].d[i], dw, dminw, is, ms, acc[t], accm[t]);
    }
  }
  for (int t = 0; t < T; ++t) out[t] = acc[t] - accm[t];
}

// Weights are taken unsigned (0..63) and the -32 offset applied once per super-block through
// bsums: sum sc * (w - 32) q = sum sc * w q - 32 * sum sc * bsum.
template <int T>
void q6_k_tokens(const uint8_t* row, int64_t blocks, const ActRow* xs, float* out) {
  const __m256i m4 = _mm256_set1_epi8(0x0f);
  const __m256i m3 = _mm256_set1_epi8(0x03);
  float acc[T] = {}, accm[T] = {};
  for (int64_t i = 0; i < blocks; ++i) {
    const auto* b = reinterpret_cast<const BlockQ6K*>(row + i * sizeof(BlockQ6K));
    const __m256i sc16 =
        _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b->scales)));
    const __m256i sc_lo = _mm256_permute4x64_epi64(sc16, 0x44);  // scales 0-7 in both halves
    const __m256i sc_hi = _mm256_permute4x64_epi64(sc16, 0xee);  // scales 8-15
    __m256i w[8], s[8];
    for (int n = 0; n < 2; ++n) {
      const __m256i ql0 = load256(b->ql + 64 * n);
      const __m256i ql1 = load256(b->ql + 64 * n + 32);
      const __m256i qh = load256(b->qh + 32 * n);
      for (int k = 0; k < 4; ++k) {
        const __m256i l = k & 1 ? ql1 : ql0;
        const __m256i low = k < 2 ? _mm256_and_si256(l, m4)
                                  : _mm256_and_si256(_mm256_srli_epi16(l, 4), m4);
        const __m256i high = _mm256_slli_epi16(
            _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * k)), m3), 4);
        w[4 * n + k] = _mm256_or_si256(low, high);
        // 32 weights = sub-blocks 8n + 2k (low half) and 8n + 2k + 1 (high half).
        s[4 * n + k] = broadcast_lanes(n == 0 ? sc_lo : sc_hi, 2 * k, 2 * k + 1);
      }
    }
    const float dw = _cvtsh_ss(b->d);
    for (int t = 0; t < T; ++t) {
      const int8_t* q = xs[t].q + i * kSuperBlock;
      __m256i isum = _mm256_setzero_si256();
      for (int c = 0; c < 8; ++c) {
        isum = madd_acc(isum, _mm256_maddubs_epi16(w[c], load256(q + 32 * c)), s[c]);
      }
      const __m256i offset = _mm256_madd_epi16(load256(xs[t].bsums + i * 16), sc16);
      int32_t is, off;
      hsum2(isum, offset, is, off);
      combine(xs[t].d[i], dw, 0.0f, is - 32 * off, 0, acc[t], accm[t]);
    }
  }
  for (int t = 0; t < T; ++t) out[t] = acc[t] - accm[t];
}

inline float q4_k_dot(const uint8_t* row, int64_t blocks, const ActRow& x) {
  float out;
  q4_k_tokens<1>(row, blocks, &x, &out);
  return out;
}
inline float q6_k_dot(const uint8_t* row, int64_t blocks, const ActRow& x) {
  float out;
  q6_k_tokens<1>(row, blocks, &x, &out);
  return out;
}

}  // namespace
}  // namespace rapide::matmul
