// AVX2 kernel for the k-quant panels (kernels/kpanel.h) times Q8_K activations: the
// AVX-512 file's structure on halves of 8 rows (a ymm holds 4 columns of 8 rows).
// vpmaddubsw multiplies the unsigned weights (<= 63) by the signed activations and adds
// pairs without saturating (2 * 63 * 127 < 32767); vpmaddwd by ones finishes each group
// of 4 in 32 bits. The integers equal the reference's, combined with kquant_combine's
// operations lane by lane: bit-identical to it.
#include <cstring>

#include "kernels/avx2_common.h"
#include "kernels/kpanel_drive.h"
#include "kernels/matmul_internal.h"

namespace rapide::matmul::avx2 {

namespace {

inline __m256i load256(const uint8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

// Bits `from`.. of each byte of h moved to bit 4 (see kpanel_avx512.cpp's high_bits).
template <int kFrom>
inline __m256i high_bits(__m256i h) {
  if constexpr (kFrom < 4) return _mm256_slli_epi16(h, 4 - kFrom);
  if constexpr (kFrom > 4) return _mm256_srli_epi16(h, kFrom - 4);
  return h;
}

// Group g's two weight vectors (h = 0, 1) of half `half` of a chunk.
template <TensorType kType, int kG>
inline void chunk_vectors(const uint8_t* ch, int half, __m256i& lo, __m256i& hi) {
  const __m256i m4 = _mm256_set1_epi8(0x0f);
  const __m256i v = load256(ch + 64 * kG + 32 * half);
  lo = _mm256_and_si256(v, m4);
  hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
  if constexpr (kType == TensorType::kQ5_K) {
    const __m256i h = load256(ch + 256 + 32 * half);
    const __m256i m = _mm256_set1_epi8(0x10);
    lo = _mm256_or_si256(lo, _mm256_and_si256(high_bits<2 * kG>(h), m));
    hi = _mm256_or_si256(hi, _mm256_and_si256(high_bits<2 * kG + 1>(h), m));
  } else if constexpr (kType == TensorType::kQ6_K) {
    const __m256i h = load256(ch + 256 + 64 * (kG / 2) + 32 * half);
    const __m256i m = _mm256_set1_epi8(0x30);
    lo = _mm256_or_si256(lo, _mm256_and_si256(high_bits<2 * ((2 * kG) % 4)>(h), m));
    hi = _mm256_or_si256(hi, _mm256_and_si256(high_bits<2 * ((2 * kG + 1) % 4)>(h), m));
  }
}

inline __m256i dot4(__m256i acc, __m256i w, __m256i x) {
  return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(w, x), _mm256_set1_epi16(1)));
}

inline __m256i load_bytes8(const uint8_t* p) {
  return _mm256_castsi128_si256(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}

constexpr int kPrefetchBlocks = 2;

// Half `half` of panel p x tokens [t, t + T).
template <TensorType kType, int T>
void kpanel_half(const PackedWeights& w, const Activations& a, int64_t p, int half, int64_t t,
                 float* y) {
  constexpr KPanelLayout kL = kpanel_layout(kType);
  constexpr bool kSix = kType == TensorType::kQ6_K;
  const int64_t blocks = w.cols / kSuperBlock;
  const uint8_t* panel = w.panel(p);
  __m256 acc[T], accm[T];
  for (int i = 0; i < T; ++i) {
    acc[i] = _mm256_setzero_ps();
    accm[i] = _mm256_setzero_ps();
  }
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* blk = panel + b * kL.block();
    __m256i isum[T], msum[T];
    for (int i = 0; i < T; ++i) {
      isum[i] = _mm256_setzero_si256();
      msum[i] = _mm256_setzero_si256();
    }
    if constexpr (!kSix) {
      for (int k = 0; k < 4; ++k) {
        const __m256i mn = _mm256_cvtepu8_epi16(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + kKpMins + 32 * k + 16 * half)));
        for (int i = 0; i < T; ++i) {
          const int16_t* bs = a.bsums + ((t + i) * blocks + b) * 16 + 4 * k;
          const uint32_t pair = static_cast<uint16_t>(bs[0] + bs[1]) |
                                static_cast<uint32_t>(static_cast<uint16_t>(bs[2] + bs[3])) << 16;
          msum[i] = _mm256_add_epi32(
              msum[i], _mm256_madd_epi16(mn, _mm256_set1_epi32(static_cast<int>(pair))));
        }
      }
    }
    for (int c = 0; c < 8; ++c) {
      const uint8_t* ch = blk + kL.header + c * kL.chunk;
      if (half == 0) {  // the first pass over the panel streams it (see kpanel_avx512.cpp)
        const uint8_t* ahead = blk + kPrefetchBlocks * kL.block() + c * (kL.block() / 8);
        for (int l = 0; l < kL.block() / 8; l += 64) {
          _mm_prefetch(reinterpret_cast<const char*>(ahead + l), _MM_HINT_T0);
        }
      }
      __m256i s0[T], s1[T];
      for (int i = 0; i < T; ++i) {
        const int16_t* bs = a.bsums + ((t + i) * blocks + b) * 16 + 2 * c;
        s0[i] = kSix ? _mm256_set1_epi32(-32 * bs[0]) : _mm256_setzero_si256();
        s1[i] = kSix ? _mm256_set1_epi32(-32 * bs[1]) : _mm256_setzero_si256();
      }
      auto group = [&]<int kG>() {
        __m256i lo, hi;
        chunk_vectors<kType, kG>(ch, half, lo, hi);
        for (int i = 0; i < T; ++i) {
          const int8_t* q = a.q + (t + i) * a.stride + b * kSuperBlock + 32 * c + 4 * kG;
          s0[i] = dot4(s0[i], lo, broadcast4(q));
          s1[i] = dot4(s1[i], hi, broadcast4(q + 16));
        }
      };
      group.template operator()<0>();
      group.template operator()<1>();
      group.template operator()<2>();
      group.template operator()<3>();
      if constexpr (kSix) {
        const __m256i sc0 = _mm256_cvtepi8_epi32(
            _mm256_castsi256_si128(load_bytes8(blk + kKpScales6 + 32 * c + 8 * half)));
        const __m256i sc1 = _mm256_cvtepi8_epi32(
            _mm256_castsi256_si128(load_bytes8(blk + kKpScales6 + 32 * c + 16 + 8 * half)));
        for (int i = 0; i < T; ++i) {
          isum[i] = _mm256_add_epi32(isum[i], _mm256_mullo_epi32(s0[i], sc0));
          isum[i] = _mm256_add_epi32(isum[i], _mm256_mullo_epi32(s1[i], sc1));
        }
      } else {
        const __m256i sc = _mm256_cvtepu8_epi32(
            _mm256_castsi256_si128(load_bytes8(blk + kKpScales + 16 * c + 8 * half)));
        for (int i = 0; i < T; ++i) {
          isum[i] =
              _mm256_add_epi32(isum[i], _mm256_mullo_epi32(_mm256_add_epi32(s0[i], s1[i]), sc));
        }
      }
    }
    const __m256 dw =
        _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 16 * half)));
    const __m256 dmin = kSix ? _mm256_setzero_ps()
                             : _mm256_cvtph_ps(_mm_loadu_si128(
                                   reinterpret_cast<const __m128i*>(blk + kKpDmin + 16 * half)));
    for (int i = 0; i < T; ++i) {
      const __m256 da = _mm256_set1_ps(a.d[(t + i) * blocks + b]);
      acc[i] = _mm256_fmadd_ps(_mm256_mul_ps(da, dw), _mm256_cvtepi32_ps(isum[i]), acc[i]);
      if constexpr (!kSix) {
        accm[i] = _mm256_fmadd_ps(_mm256_mul_ps(da, dmin), _mm256_cvtepi32_ps(msum[i]), accm[i]);
      }
    }
  }
  const uint32_t mask = row_mask(w, p);
  for (int i = 0; i < T; ++i) {
    store_half(y, w.rows, p, half, t + i, mask, _mm256_sub_ps(acc[i], accm[i]));
  }
}

template <TensorType kType, int T>
struct Tile {
  static void run(const PackedWeights& w, const Activations& a, int64_t p, int64_t t, float* y) {
    kpanel_half<kType, T>(w, a, p, 0, t, y);
    kpanel_half<kType, T>(w, a, p, 1, t, y);
  }
};

}  // namespace

void kpanel(const PackedWeights& w, const Activations& a, int64_t p0, int64_t p1, int64_t t0,
            int64_t t1, float* y) {
  kpanel_drive<Tile, 4, 4>(w, a, p0, p1, t0, t1, y);
}

}  // namespace rapide::matmul::avx2
