// The row-wise k-quant (Q2_K, Q3_K, IQ4_XS) dot products against Q8_K activations (Q4_K,
// Q5_K and Q6_K are repacked into panels instead: kernels/kpanel.h), shared by the
// AVX2 and AVX-512 kernel files (compiled with each file's flags; the anonymous namespace
// keeps the two instantiations apart). Included only by rowquant_dot_avx2.cpp and
// rowquant_dot_avx512.cpp. IQ4_XS's signed table values (|w| <= 127) go through vpsignb.
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

// vpshufb masks: vector c's low 8 int16 lanes take lane lo(c) of the source's low half,
// its high 8 lanes lane hi(c) of the high half. Per-32 scales: lo = hi = c; per-16 scales
// (two sub-blocks per vector): lo = 2 (c % 4), hi = lo + 1. Kept in memory so the shuffles
// read them through the load ports instead of rebuilding them with shuffle-port ops.
struct alignas(32) ShuffleMasks {
  uint8_t bytes[8][32];
};
constexpr ShuffleMasks make_masks(bool per16) {
  ShuffleMasks m{};
  for (int c = 0; c < 8; ++c) {
    const int lo = per16 ? 2 * (c % 4) : c, hi = per16 ? lo + 1 : c;
    for (int i = 0; i < 32; ++i) {
      const int lane = i < 16 ? lo : hi;
      m.bytes[c][i] = static_cast<uint8_t>(2 * lane + (i & 1));
    }
  }
  return m;
}
inline constexpr ShuffleMasks kPer32Masks = make_masks(false);
inline constexpr ShuffleMasks kPer16Masks = make_masks(true);

inline __m256i shuffle_with(__m256i src, const ShuffleMasks& masks, int c) {
  return _mm256_shuffle_epi8(src,
                             _mm256_load_si256(reinterpret_cast<const __m256i*>(masks.bytes[c])));
}

// One super-block unpacked into registers: the 256 weights as 8 vectors of 32 bytes (in
// element order), the scale of each vector's two 16-weight halves broadcast to its 16-bit
// lanes, and `m`, the 16 int16 multipliers of the activations' bsums (the mins, or for the
// offset types the scales).
struct SuperBlock {
  __m256i w[8];
  __m256i s[8];
  __m256i m;
  float dw, dminw;
};

// Per type: whether weights are signed (IQ4_XS), and the offset subtracted from the
// unsigned stored weights (Q3_K: 4), applied through bsums.
template <TensorType kType>
struct KTraits;
template <>
struct KTraits<TensorType::kQ2_K> {
  using Block = BlockQ2K;
  static constexpr bool kSigned = false;
  static constexpr int kOffset = 0;
};
template <>
struct KTraits<TensorType::kQ3_K> {
  using Block = BlockQ3K;
  static constexpr bool kSigned = false;
  static constexpr int kOffset = 4;
};
template <>
struct KTraits<TensorType::kIQ4_XS> {
  using Block = BlockIq4Xs;
  static constexpr bool kSigned = true;
  static constexpr int kOffset = 0;
};

// Scales of 16-weight sub-blocks (16 int16 lanes) onto the 8 vectors: vector c covers
// sub-blocks 2c and 2c + 1.
inline void scales_per16(__m256i sc16, __m256i* s) {
  const __m256i lo = _mm256_permute4x64_epi64(sc16, 0x44);  // scales 0-7 in both halves
  const __m256i hi = _mm256_permute4x64_epi64(sc16, 0xee);  // scales 8-15
  for (int c = 0; c < 8; ++c) s[c] = shuffle_with(c < 4 ? lo : hi, kPer16Masks, c);
}

// Scales of 32-weight sub-blocks (lanes 0-7 of sc8) onto the 8 vectors.
inline void scales_per32(__m256i sc8, __m256i* s) {
  const __m256i both = _mm256_permute4x64_epi64(sc8, 0x44);
  for (int c = 0; c < 8; ++c) s[c] = shuffle_with(both, kPer32Masks, c);
}

template <TensorType kType>
void unpack(const uint8_t* p, SuperBlock& u);

template <>
inline void unpack<TensorType::kQ2_K>(const uint8_t* p, SuperBlock& u) {
  const auto* b = reinterpret_cast<const BlockQ2K*>(p);
  const __m256i m3 = _mm256_set1_epi8(0x03);
  for (int n = 0; n < 2; ++n) {
    const __m256i qs = load256(b->qs + 32 * n);
    for (int k = 0; k < 4; ++k) {
      u.w[4 * n + k] = _mm256_and_si256(_mm256_srl_epi16(qs, _mm_cvtsi32_si128(2 * k)), m3);
    }
  }
  const __m256i sm =
      _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b->scales)));
  scales_per16(_mm256_and_si256(sm, _mm256_set1_epi16(0x0f)), u.s);
  u.m = _mm256_and_si256(_mm256_srli_epi16(sm, 4), _mm256_set1_epi16(0x0f));
  u.dw = _cvtsh_ss(b->d);
  u.dminw = _cvtsh_ss(b->dmin);
}

template <>
inline void unpack<TensorType::kQ3_K>(const uint8_t* p, SuperBlock& u) {
  const auto* b = reinterpret_cast<const BlockQ3K*>(p);
  const __m256i m3 = _mm256_set1_epi8(0x03);
  const __m256i m1 = _mm256_set1_epi8(0x01);
  const __m256i hm = load256(b->hmask);
  for (int n = 0; n < 2; ++n) {
    const __m256i qs = load256(b->qs + 32 * n);
    for (int k = 0; k < 4; ++k) {
      const __m256i low = _mm256_and_si256(_mm256_srl_epi16(qs, _mm_cvtsi32_si128(2 * k)), m3);
      const __m256i high = _mm256_and_si256(_mm256_srl_epi16(hm, _mm_cvtsi32_si128(4 * n + k)), m1);
      u.w[4 * n + k] = _mm256_or_si256(low, _mm256_slli_epi16(high, 2));  // stored + 4: 0..7
    }
  }
  // q3k_scales with 32-bit ops: low nibbles from bytes 0-7, 2-bit high parts from 8-11.
  uint32_t a[4];
  std::memcpy(a, b->scales, 12);
  constexpr uint32_t k4 = 0x0f0f0f0f, k2 = 0x03030303;
  const uint32_t tmp = a[2];
  a[2] = ((a[0] >> 4) & k4) | (((tmp >> 4) & k2) << 4);
  a[3] = ((a[1] >> 4) & k4) | (((tmp >> 6) & k2) << 4);
  a[0] = (a[0] & k4) | ((tmp & k2) << 4);
  a[1] = (a[1] & k4) | (((tmp >> 2) & k2) << 4);
  const __m128i sc8 = _mm_sub_epi8(_mm_set_epi32(static_cast<int>(a[3]), static_cast<int>(a[2]),
                                                 static_cast<int>(a[1]), static_cast<int>(a[0])),
                                   _mm_set1_epi8(32));
  u.m = _mm256_cvtepi8_epi16(sc8);
  scales_per16(u.m, u.s);
  u.dw = _cvtsh_ss(b->d);
  u.dminw = 0.0f;
}

template <>
inline void unpack<TensorType::kIQ4_XS>(const uint8_t* p, SuperBlock& u) {
  const auto* b = reinterpret_cast<const BlockIq4Xs*>(p);
  const __m256i table =
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues)));
  const __m128i m4 = _mm_set1_epi8(0x0f);
  alignas(16) int16_t sc[8];
  for (int ib = 0; ib < 8; ++ib) {
    // Sub-block ib: 16 bytes; low nibbles are its weights 0-15, high nibbles 16-31.
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b->qs + 16 * ib));
    const __m256i idx =
        _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), m4), _mm_and_si128(q, m4));
    u.w[ib] = _mm256_shuffle_epi8(table, idx);
    sc[ib] = static_cast<int16_t>(iq4xs_scale(*b, ib) - 32);
  }
  scales_per32(_mm256_castsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(sc))), u.s);
  u.m = _mm256_setzero_si256();
  u.dw = _cvtsh_ss(b->d);
  u.dminw = 0.0f;
}

// The integer dot products of one unpacked super-block with one token: isum (scaled
// sub-block sums, 8 lanes to add up) and the bsums products (mins or offsets, 8 lanes).
template <bool kSigned>
inline void superblock_sums(const SuperBlock& u, const __m256i* wabs, const int8_t* q,
                            const int16_t* bsums, __m256i& isum, __m256i& mv) {
  isum = _mm256_setzero_si256();
  for (int c = 0; c < 8; ++c) {
    const __m256i a = load256(q + 32 * c);
    // Signed weights: |w| times a with w's sign (|w|, |a| <= 127: no saturation).
    const __m256i p = kSigned ? _mm256_maddubs_epi16(wabs[c], _mm256_sign_epi8(a, u.w[c]))
                              : _mm256_maddubs_epi16(u.w[c], a);
    isum = madd_acc(isum, p, u.s[c]);
  }
  mv = _mm256_madd_epi16(load256(bsums), u.m);
}

// Four (isum, bsums products) pairs summed to 4 lanes each with one vphaddd tree; for the
// offset types the offset is applied and the min sums zeroed, as the scalar path does.
template <int kOffset>
inline void reduce4(const __m256i* iv, const __m256i* mv, __m128i& is, __m128i& ms) {
  const __m256i a =
      _mm256_hadd_epi32(_mm256_hadd_epi32(iv[0], iv[1]), _mm256_hadd_epi32(iv[2], iv[3]));
  const __m256i b =
      _mm256_hadd_epi32(_mm256_hadd_epi32(mv[0], mv[1]), _mm256_hadd_epi32(mv[2], mv[3]));
  is = _mm_add_epi32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
  ms = _mm_add_epi32(_mm256_castsi256_si128(b), _mm256_extracti128_si256(b, 1));
  if constexpr (kOffset != 0) {
    is = _mm_sub_epi32(is, _mm_slli_epi32(ms, 2));
    ms = _mm_setzero_si128();
  }
}

// Row x T tokens for a k-quant type (see the file comment). With 4 tokens, the horizontal
// sums of all four are taken by one tree of vphaddd and the float part runs in 4 lanes
// (the same operations lane by lane, so the same results as T = 1).
template <TensorType kType, int T>
void kquant_tokens(const uint8_t* row, int64_t blocks, const ActRow* xs, float* out) {
  using Traits = KTraits<kType>;
  static_assert(Traits::kOffset == 0 || Traits::kOffset == 4);
  float acc[T] = {}, accm[T] = {};
  __m128 acc4 = _mm_setzero_ps(), accm4 = _mm_setzero_ps();
  SuperBlock u;
  __m256i wabs[8];
  for (int64_t i = 0; i < blocks; ++i) {
    unpack<kType>(row + i * sizeof(typename Traits::Block), u);
    if constexpr (Traits::kSigned) {
      for (int c = 0; c < 8; ++c) wabs[c] = _mm256_sign_epi8(u.w[c], u.w[c]);
    }
    if constexpr (T == 4) {
      __m256i iv[4], mv[4];
      for (int t = 0; t < 4; ++t) {
        superblock_sums<Traits::kSigned>(u, wabs, xs[t].q + i * kSuperBlock, xs[t].bsums + i * 16,
                                         iv[t], mv[t]);
      }
      __m128i is, ms;
      reduce4<Traits::kOffset>(iv, mv, is, ms);
      const __m128 da = _mm_set_ps(xs[3].d[i], xs[2].d[i], xs[1].d[i], xs[0].d[i]);
      acc4 = _mm_fmadd_ps(_mm_mul_ps(da, _mm_set1_ps(u.dw)), _mm_cvtepi32_ps(is), acc4);
      accm4 = _mm_fmadd_ps(_mm_mul_ps(da, _mm_set1_ps(u.dminw)), _mm_cvtepi32_ps(ms), accm4);
    } else {
      for (int t = 0; t < T; ++t) {
        __m256i iv, mv;
        superblock_sums<Traits::kSigned>(u, wabs, xs[t].q + i * kSuperBlock, xs[t].bsums + i * 16,
                                         iv, mv);
        int32_t is, ms;
        hsum2(iv, mv, is, ms);
        if constexpr (Traits::kOffset != 0) {
          combine(xs[t].d[i], u.dw, 0.0f, is - Traits::kOffset * ms, 0, acc[t], accm[t]);
        } else {
          combine(xs[t].d[i], u.dw, u.dminw, is, ms, acc[t], accm[t]);
        }
      }
    }
  }
  if constexpr (T == 4) {
    _mm_storeu_ps(out, _mm_sub_ps(acc4, accm4));
  } else {
    for (int t = 0; t < T; ++t) out[t] = acc[t] - accm[t];
  }
}

// Four rows (row_bytes apart) x one token: decode's tile. The rows' sums share one
// reduction tree and the float part runs in 4 lanes, one per row (the same operations lane
// by lane as the one-row path).
template <TensorType kType>
void kquant_rows4(const uint8_t* rows, int64_t row_bytes, int64_t blocks, const ActRow& x,
                  float* out) {
  using Traits = KTraits<kType>;
  static_assert(Traits::kOffset == 0 || Traits::kOffset == 4);
  __m128 acc4 = _mm_setzero_ps(), accm4 = _mm_setzero_ps();
  for (int64_t i = 0; i < blocks; ++i) {
    __m256i iv[4], mv[4];
    float dw[4], dmin[4];
    for (int r = 0; r < 4; ++r) {
      SuperBlock u;
      unpack<kType>(rows + r * row_bytes + i * sizeof(typename Traits::Block), u);
      __m256i wabs[8];
      if constexpr (Traits::kSigned) {
        for (int c = 0; c < 8; ++c) wabs[c] = _mm256_sign_epi8(u.w[c], u.w[c]);
      }
      superblock_sums<Traits::kSigned>(u, wabs, x.q + i * kSuperBlock, x.bsums + i * 16, iv[r],
                                       mv[r]);
      dw[r] = u.dw;
      dmin[r] = Traits::kOffset != 0 ? 0.0f : u.dminw;
    }
    __m128i is, ms;
    reduce4<Traits::kOffset>(iv, mv, is, ms);
    const __m128 da = _mm_set1_ps(x.d[i]);
    const __m128 dwv = _mm_setr_ps(dw[0], dw[1], dw[2], dw[3]);
    const __m128 dminv = _mm_setr_ps(dmin[0], dmin[1], dmin[2], dmin[3]);
    acc4 = _mm_fmadd_ps(_mm_mul_ps(da, dwv), _mm_cvtepi32_ps(is), acc4);
    accm4 = _mm_fmadd_ps(_mm_mul_ps(da, dminv), _mm_cvtepi32_ps(ms), accm4);
  }
  _mm_storeu_ps(out, _mm_sub_ps(acc4, accm4));
}

template <TensorType kType>
float kquant_dot(const uint8_t* row, int64_t blocks, const ActRow& x) {
  float out;
  kquant_tokens<kType, 1>(row, blocks, &x, &out);
  return out;
}

// The k-quant kernels of this ISA (nullptr for other types).
inline RowDot kquant_row_dot(TensorType type) {
  switch (type) {
    case TensorType::kQ2_K:
      return kquant_dot<TensorType::kQ2_K>;
    case TensorType::kQ3_K:
      return kquant_dot<TensorType::kQ3_K>;
    case TensorType::kIQ4_XS:
      return kquant_dot<TensorType::kIQ4_XS>;
    default:
      return nullptr;
  }
}

inline RowDotTokens kquant_row_dot_tokens(TensorType type) {
  switch (type) {
    case TensorType::kQ2_K:
      return kquant_tokens<TensorType::kQ2_K, kRowTokens>;
    case TensorType::kQ3_K:
      return kquant_tokens<TensorType::kQ3_K, kRowTokens>;
    case TensorType::kIQ4_XS:
      return kquant_tokens<TensorType::kIQ4_XS, kRowTokens>;
    default:
      return nullptr;
  }
}

inline RowDotRows kquant_row_dot_rows(TensorType type) {
  switch (type) {
    case TensorType::kQ2_K:
      return kquant_rows4<TensorType::kQ2_K>;
    case TensorType::kQ3_K:
      return kquant_rows4<TensorType::kQ3_K>;
    case TensorType::kIQ4_XS:
      return kquant_rows4<TensorType::kIQ4_XS>;
    default:
      return nullptr;
  }
}

}  // namespace
}  // namespace rapide::matmul
