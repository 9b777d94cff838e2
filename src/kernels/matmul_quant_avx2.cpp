// AVX2 kernels for Q8_0 / Q4_0 weights times Q8_0-quantized activations.
//
// vpmaddubsw multiplies unsigned by signed bytes and adds pairs into saturating int16.
// Q8_0 uses llama.cpp's sign trick: |w| (unsigned) times sign(w) * a (signed) stays within
// int16 (2 * 128 * 127 < 32767), so no bias is needed. Q4_0 nibbles are already unsigned
// (w + 8) and small, and the block's accumulator starts at -8 * sum(a). Integer block sums
// are exact, then scaled and summed in the reference's order: bit-exact with it.
#include <immintrin.h>

#include <cstring>

#include "base/fp16.h"
#include "kernels/avx2_common.h"
#include "kernels/matmul_drive.h"
#include "kernels/matmul_internal.h"

namespace rapide::matmul::avx2 {

namespace {

// H halves (8 rows each) of R = H / 2 panels.
template <typename Weights, int R, int T>
void quant_tile(const PackedWeights& w, const Activations& a, int64_t p, int64_t t, float* y) {
  constexpr int H = 2 * R;
  __m256 acc[H][T];
  for (int h = 0; h < H; ++h) {
    for (int i = 0; i < T; ++i) acc[h][i] = _mm256_setzero_ps();
  }
  const uint8_t* wp[R];
  for (int r = 0; r < R; ++r) wp[r] = w.panel(p + r);
  const int8_t* xs[T];
  const float* ds[T];
  const int32_t* bs[T];
  for (int i = 0; i < T; ++i) {
    xs[i] = a.q + (t + i) * a.stride;
    ds[i] = a.d + (t + i) * a.blocks;
    bs[i] = a.bias + (t + i) * a.blocks;
  }
  for (int64_t b = 0; b < w.blocks(); ++b) {
    const uint8_t* pb[R];
    for (int r = 0; r < R; ++r) {
      pb[r] = wp[r] + b * Weights::kBlockBytes;
      for (int64_t l = 0; l < Weights::kBlockBytes; l += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(pb[r] + 2 * Weights::kBlockBytes + l),
                     _MM_HINT_T0);
      }
    }
    __m256i iacc[H][T];
    for (int i = 0; i < T; ++i) {
      const __m256i bias = _mm256_set1_epi32(bs[i][b]);
      for (int h = 0; h < H; ++h) iacc[h][i] = bias;
    }
    Weights::template dot<H, T>(iacc, pb, xs, b * kQuantBlock);
    for (int h = 0; h < H; ++h) {
      const __m256 dw = _mm256_cvtph_ps(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(pb[h / 2] + h % 2 * 16)));
      for (int i = 0; i < T; ++i) {
        const __m256 scale = _mm256_mul_ps(dw, _mm256_set1_ps(ds[i][b]));
        acc[h][i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(iacc[h][i]), scale, acc[h][i]);
      }
    }
  }
  for (int h = 0; h < H; ++h) {
    const uint32_t mask = row_mask(w, p + h / 2);
    for (int i = 0; i < T; ++i) store_half(y, w.rows, p + h / 2, h % 2, t + i, mask, acc[h][i]);
  }
}

struct Q8Weights {
  static constexpr int64_t kBlockBytes = kQ8PanelBlockBytes;
  template <int H, int T>
  static void dot(__m256i (&iacc)[H][T], const uint8_t* const (&pb)[H / 2],
                  const int8_t* const (&xs)[T], int64_t col) {
    const __m256i ones = _mm256_set1_epi16(1);
    const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
    for (int g = 0; g < 8; ++g) {
      for (int h = 0; h < H; ++h) {
        // Packed as w + 128 for VNNI; flip back to signed for the sign trick.
        const __m256i wv = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(
                                                pb[h / 2] + 2 * kPanel + g * 64 + h % 2 * 32)),
                                            flip);
        const __m256i aw = _mm256_abs_epi8(wv);
        for (int i = 0; i < T; ++i) {
          const __m256i sx = _mm256_sign_epi8(broadcast4(xs[i] + col + 4 * g), wv);
          const __m256i prod = _mm256_madd_epi16(_mm256_maddubs_epi16(aw, sx), ones);
          iacc[h][i] = _mm256_add_epi32(iacc[h][i], prod);
        }
      }
    }
  }
};

struct Q4Weights {
  static constexpr int64_t kBlockBytes = kQ4PanelBlockBytes;
  template <int H, int T>
  static void dot(__m256i (&iacc)[H][T], const uint8_t* const (&pb)[H / 2],
                  const int8_t* const (&xs)[T], int64_t col) {
    const __m256i ones = _mm256_set1_epi16(1);
    const __m256i low = _mm256_set1_epi8(0x0f);
    for (int g = 0; g < 4; ++g) {
      for (int h = 0; h < H; ++h) {
        const __m256i v = _mm256_loadu_si256(
            reinterpret_cast<const __m256i*>(pb[h / 2] + 2 * kPanel + g * 64 + h % 2 * 32));
        const __m256i lo = _mm256_and_si256(v, low);
        const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low);
        for (int i = 0; i < T; ++i) {
          // Products are at most 15 * 127, so the int16 pair sums cannot saturate.
          const __m256i plo = _mm256_maddubs_epi16(lo, broadcast4(xs[i] + col + 4 * g));
          const __m256i phi = _mm256_maddubs_epi16(hi, broadcast4(xs[i] + col + 16 + 4 * g));
          iacc[h][i] =
              _mm256_add_epi32(iacc[h][i], _mm256_madd_epi16(_mm256_add_epi16(plo, phi), ones));
        }
      }
    }
  }
};

template <int R, int T>
struct Q8Tile {
  static void run(const PackedWeights& w, const Activations& a, int64_t p, int64_t t, float* y) {
    quant_tile<Q8Weights, R, T>(w, a, p, t, y);
  }
};
template <int R, int T>
struct Q4Tile {
  static void run(const PackedWeights& w, const Activations& a, int64_t p, int64_t t, float* y) {
    quant_tile<Q4Weights, R, T>(w, a, p, t, y);
  }
};

// Reduces four blocks' vectors (v[k]: block k's lane-wise partial maxima or sums) with
// `combine` in one tree of shuffles, laid out [b0 b0 b2 b2 | b1 b1 b3 b3] (kFourBlockLanes:
// where block k is), as matmul_quant_avx512.cpp's quantizer does (which says what it saved).
// The shuffles only move bits (integer sums go through as floats' bit patterns); max and
// integer addition are exact, so the order does not change the results.
constexpr int kFourBlockLanes[4] = {0, 4, 2, 6};
template <typename Combine>
__m256 reduce_four_blocks(const __m256 v[4], Combine combine) {
  const __m256 v01 =
      combine(_mm256_permute2f128_ps(v[0], v[1], 0x20), _mm256_permute2f128_ps(v[0], v[1], 0x31));
  const __m256 v23 =
      combine(_mm256_permute2f128_ps(v[2], v[3], 0x20), _mm256_permute2f128_ps(v[2], v[3], 0x31));
  const __m256 u = combine(_mm256_shuffle_ps(v01, v23, _MM_SHUFFLE(1, 0, 1, 0)),
                           _mm256_shuffle_ps(v01, v23, _MM_SHUFFLE(3, 2, 3, 2)));
  return combine(u, _mm256_permute_ps(u, _MM_SHUFFLE(2, 3, 0, 1)));
}

// Block k's codes (x * id, nearest even by MXCSR) stored in order; returns their lane sums.
__m256i quantize_block(const __m256 v[4], __m256 id, int8_t* q) {
  __m256i qi[4];
  for (int k = 0; k < 4; ++k) qi[k] = _mm256_cvtps_epi32(_mm256_mul_ps(v[k], id));
  // The packs work within 128-bit lanes; the permute restores element order.
  const __m256i p01 = _mm256_packs_epi32(qi[0], qi[1]);
  const __m256i p23 = _mm256_packs_epi32(qi[2], qi[3]);
  const __m256i bytes = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(p01, p23),
                                                    _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), bytes);
  return _mm256_add_epi32(_mm256_add_epi32(qi[0], qi[1]), _mm256_add_epi32(qi[2], qi[3]));
}

}  // namespace

void quantize_q8(const float* x, int64_t cols, int bias_offset, int8_t* q, float* d,
                 int32_t* bias) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const int64_t blocks = cols / kQuantBlock;
  // Four blocks at a time: their maxima and code sums in one tree each, their scales and
  // inverse scales in one division each (the same IEEE results as one block at a time; F16C
  // for the scale instead of the software conversion). On Zen 5, 32 rows of 768, the two
  // ways alternated in one process: 9.7 -> 5.0 ns a block.
  const __m256i gather = _mm256_setr_epi32(0, 4, 2, 6, 0, 0, 0, 0);
  const __m256 d127 = _mm256_set1_ps(127.0f);
  int64_t b = 0;
  for (; b + 4 <= blocks; b += 4) {
    const float* xb = x + b * kQuantBlock;
    __m256 v[4][4], m[4];
    for (int k = 0; k < 4; ++k) {
      m[k] = _mm256_setzero_ps();
      for (int j = 0; j < 4; ++j) {
        v[k][j] = _mm256_loadu_ps(xb + k * kQuantBlock + 8 * j);
        m[k] = _mm256_max_ps(m[k], _mm256_andnot_ps(sign, v[k][j]));
      }
    }
    const __m256 amax =
        reduce_four_blocks(m, [](__m256 x, __m256 y) { return _mm256_max_ps(x, y); });
    // F16C rounds to nearest even, as fp32_to_fp16.
    const __m256 scale = _mm256_cvtph_ps(
        _mm256_cvtps_ph(_mm256_div_ps(amax, d127), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    const __m256 inverse = _mm256_and_ps(_mm256_cmp_ps(amax, _mm256_setzero_ps(), _CMP_NEQ_OQ),
                                         _mm256_div_ps(d127, amax));
    _mm_storeu_ps(d + b, _mm256_castps256_ps128(_mm256_permutevar8x32_ps(scale, gather)));
    __m256 sums[4];  // int32 lanes
    for (int k = 0; k < 4; ++k) {
      const __m256 id = _mm256_permutevar8x32_ps(inverse, _mm256_set1_epi32(kFourBlockLanes[k]));
      sums[k] = _mm256_castsi256_ps(quantize_block(v[k], id, q + (b + k) * kQuantBlock));
    }
    const __m256i sum = _mm256_castps_si256(reduce_four_blocks(sums, [](__m256 x, __m256 y) {
      return _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(x), _mm256_castps_si256(y)));
    }));
    const __m256i total = _mm256_mullo_epi32(sum, _mm256_set1_epi32(-bias_offset));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(bias + b),
                     _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(total, gather)));
  }
  for (; b < blocks; ++b) {
    const float* xb = x + b * kQuantBlock;
    __m256 v[4];
    __m256 m = _mm256_setzero_ps();
    for (int k = 0; k < 4; ++k) {
      v[k] = _mm256_loadu_ps(xb + 8 * k);
      m = _mm256_max_ps(m, _mm256_andnot_ps(sign, v[k]));
    }
    const float amax = hmax_ps(m);
    d[b] = fp16_to_fp32(fp32_to_fp16(amax / 127.0f));
    const __m256 id = _mm256_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);
    const __m256i sum = quantize_block(v, id, q + b * kQuantBlock);
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1));
    bias[b] = -bias_offset * _mm_cvtsi128_si32(s4);
  }
}

// 2 halves x 2 tokens: 4 integer + 4 float accumulators plus the operands fit 16 ymm.
void q8_0(const PackedWeights& w, const Activations& a, int64_t p0, int64_t p1, int64_t t0,
          int64_t t1, float* y) {
  drive<1, 2, Q8Tile>(w, a, p0, p1, t0, t1, y, a.stride);
}

void q4_0(const PackedWeights& w, const Activations& a, int64_t p0, int64_t p1, int64_t t0,
          int64_t t1, float* y) {
  drive<1, 2, Q4Tile>(w, a, p0, p1, t0, t1, y, a.stride);
}

}  // namespace rapide::matmul::avx2
