// The 32-weight row-wise types (Q4_1, Q5_0, Q5_1, IQ4_NL) against Q8_0 / Q8_1 activations,
// shared by the AVX2 and AVX-512 kernel files (compiled with each file's flags; the
// anonymous namespace keeps the instantiations apart). Included only by
// rowquant_dot_avx2.cpp and rowquant_dot_avx512.cpp.
//
// Each block's 32 weights become one vector of bytes in element order (nibbles, the 5th
// bit of Q5_x expanded from qh with a byte shuffle and compare, IQ4_NL's levels by vpshufb);
// signed weights (Q5_0: q - 16, IQ4_NL) multiply through vpsignb. The exact integer sum of
// each block is combined in block order exactly as the scalar reference does (dot32 in
// rowquant.cpp): acc = fma(dw * da, sum, acc), summs = fma(m, s, summs), acc + summs.
#pragma once

#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "kernels/rowquant.h"
#include "kernels/rowquant_kquant_simd.h"  // hsum2

namespace rapide::matmul {
namespace {

// Byte j = 0xff where bit j of x is set.
inline __m256i bytes_from_bits(uint32_t x) {
  const __m256i spread = _mm256_setr_epi64x(0x0000000000000000, 0x0101010101010101,
                                            0x0202020202020202, 0x0303030303030303);
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  const __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(x)), spread);
  return _mm256_cmpeq_epi8(_mm256_and_si256(bytes, bit), bit);
}

template <TensorType kType>
struct B32;
template <>
struct B32<TensorType::kQ4_1> {
  using Block = BlockQ4_1;
  static constexpr bool kSigned = false, kMin = true;
};
template <>
struct B32<TensorType::kQ5_0> {
  using Block = BlockQ5_0;
  static constexpr bool kSigned = true, kMin = false;
};
template <>
struct B32<TensorType::kQ5_1> {
  using Block = BlockQ5_1;
  static constexpr bool kSigned = false, kMin = true;
};
template <>
struct B32<TensorType::kIQ4_NL> {
  using Block = BlockIq4Nl;
  static constexpr bool kSigned = true, kMin = false;
};

// The weights of one block in element order (see the layouts in formats/quant_blocks.h).
template <TensorType kType>
inline __m256i block_weights(const typename B32<kType>::Block& b) {
  const __m128i m4 = _mm_set1_epi8(0x0f);
  const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs));
  __m256i w = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), m4), _mm_and_si128(q, m4));
  if constexpr (kType == TensorType::kIQ4_NL) {
    const __m256i table = _mm256_broadcastsi128_si256(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues)));
    w = _mm256_shuffle_epi8(table, w);
  } else if constexpr (kType == TensorType::kQ5_0 || kType == TensorType::kQ5_1) {
    uint32_t qh;
    std::memcpy(&qh, b.qh, 4);
    w = _mm256_or_si256(w, _mm256_and_si256(bytes_from_bits(qh), _mm256_set1_epi8(0x10)));
    if constexpr (kType == TensorType::kQ5_0) w = _mm256_sub_epi8(w, _mm256_set1_epi8(16));
  }
  return w;
}

// The 8 partial int32 sums of one block's products.
template <TensorType kType>
inline __m256i block_sums(const typename B32<kType>::Block& b, const int8_t* q) {
  const __m256i w = block_weights<kType>(b);
  const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q));
  // |w| <= 127 and |a| <= 127 for the signed types, w <= 31 otherwise: no saturation.
  const __m256i p = B32<kType>::kSigned
                        ? _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(a, w))
                        : _mm256_maddubs_epi16(w, a);
  return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

template <TensorType kType>
float block32_dot(const uint8_t* row, int64_t blocks, const ActRow& x) {
  using Traits = B32<kType>;
  using Block = typename Traits::Block;
  const auto* b = reinterpret_cast<const Block*>(row);
  float acc = 0.0f, summs = 0.0f;
  auto add = [&](int64_t i, int32_t sum) {
    acc = std::fmaf(_cvtsh_ss(b[i].d) * x.d[i], static_cast<float>(sum), acc);
    if constexpr (Traits::kMin) summs = std::fmaf(_cvtsh_ss(b[i].m), x.s[i], summs);
  };
  int64_t i = 0;
  for (; i + 2 <= blocks; i += 2) {  // two blocks' horizontal sums at once
    int32_t s0, s1;
    hsum2(block_sums<kType>(b[i], x.q + 32 * i), block_sums<kType>(b[i + 1], x.q + 32 * i + 32),
          s0, s1);
    add(i, s0);
    add(i + 1, s1);
  }
  if (i < blocks) {
    int32_t s0, s1;
    const __m256i v = block_sums<kType>(b[i], x.q + 32 * i);
    hsum2(v, v, s0, s1);
    add(i, s0);
  }
  return acc + summs;
}

inline RowDot block32_row_dot(TensorType type) {
  switch (type) {
    case TensorType::kQ4_1:
      return block32_dot<TensorType::kQ4_1>;
    case TensorType::kQ5_0:
      return block32_dot<TensorType::kQ5_0>;
    case TensorType::kQ5_1:
      return block32_dot<TensorType::kQ5_1>;
    case TensorType::kIQ4_NL:
      return block32_dot<TensorType::kIQ4_NL>;
    default:
      return nullptr;
  }
}

}  // namespace
}  // namespace rapide::matmul
