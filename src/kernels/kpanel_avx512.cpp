// AVX-512 VNNI kernel for the k-quant panels (kernels/kpanel.h) times Q8_K activations.
//
// Each 64-byte load of a chunk is 4 columns of 16 rows in two nibbles: masked and shifted
// into two vpdpbusd operands (the unsigned weights), the high bits merged in with one shift
// and one vpternlogd each; every activation quad is broadcast from memory to all 16 rows.
// A sub-block's sum is exact in 32 bits, multiplied by the rows' expanded scales (vpmulld)
// and summed per super-block; the mins' products with the activations' pair sums take one
// vpdpwssd per two sub-blocks. The float part is kquant_combine in 16 lanes, one per row:
// bit-identical to the scalar reference.
#include <cstring>

#include "kernels/avx512_common.h"
#include "kernels/kpanel_drive.h"
#include "kernels/matmul_internal.h"

namespace rapide::matmul::avx512 {

namespace {

inline __m512i load512(const uint8_t* p) {
  return _mm512_loadu_si512(p);
}

// Bits 4-5 (mask) of each byte from bits `from`.. of the same byte of h: a 16-bit shift
// moves no wanted bit across a byte boundary for from in 0..7 (Q5_K) or 0, 2, 4, 6 (Q6_K).
template <int kFrom>
inline __m512i high_bits(__m512i h) {
  if constexpr (kFrom < 4) return _mm512_slli_epi16(h, 4 - kFrom);
  if constexpr (kFrom > 4) return _mm512_srli_epi16(h, kFrom - 4);
  return h;
}

// low | (high & mask) in one instruction.
inline __m512i merge_high(__m512i low, __m512i high, __m512i mask) {
  return _mm512_ternarylogic_epi32(low, high, mask, 0xf8);
}

// One chunk's 8 weight vectors v = 2g + h for group g, with the high bits merged.
template <TensorType kType, int kG>
inline void chunk_vectors(const uint8_t* ch, __m512i& lo, __m512i& hi) {
  const __m512i m4 = _mm512_set1_epi8(0x0f);
  const __m512i v = load512(ch + 64 * kG);
  lo = _mm512_and_si512(v, m4);
  hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
  if constexpr (kType == TensorType::kQ5_K) {
    const __m512i h = load512(ch + 256);
    const __m512i m = _mm512_set1_epi8(0x10);
    lo = merge_high(lo, high_bits<2 * kG>(h), m);
    hi = merge_high(hi, high_bits<2 * kG + 1>(h), m);
  } else if constexpr (kType == TensorType::kQ6_K) {
    const __m512i h = load512(ch + 256 + 64 * (kG / 2));
    const __m512i m = _mm512_set1_epi8(0x30);
    lo = merge_high(lo, high_bits<2 * ((2 * kG) % 4)>(h), m);
    hi = merge_high(hi, high_bits<2 * ((2 * kG + 1) % 4)>(h), m);
  }
}

// Software prefetch, kPrefetchBlocks blocks ahead of the one being read, an eighth of a
// block per chunk. Unlike Q4_0's short blocks (matmul_quant_avx512.cpp, where it only hurt)
// a k-quant block is ~300 instructions long, so the out-of-order window holds about one
// block of loads and the hardware prefetcher alone left decode latency-bound. Measured on
// Zen 4, 1 thread, one 200000 x 768 matrix streamed from DRAM: Q4_K 6 -> 18 GB/s, Q6_K
// 11 -> 16-18 GB/s (Q4_0: 11-17 GB/s in the same runs); 1 and 4 blocks ahead were no better.
constexpr int kPrefetchBlocks = 2;

// Panel p x tokens [t, t + T).
template <TensorType kType, int T>
void kpanel_tile(const PackedWeights& w, const Activations& a, int64_t p, int64_t t, float* y) {
  constexpr KPanelLayout kL = kpanel_layout(kType);
  constexpr bool kSix = kType == TensorType::kQ6_K;
  const int64_t blocks = w.cols / kSuperBlock;
  const uint8_t* panel = w.panel(p);
  __m512 acc[T], accm[T];
  const int8_t* xq[T];
  const int16_t* xb[T];
  const float* xd[T];
  for (int i = 0; i < T; ++i) {
    acc[i] = _mm512_setzero_ps();
    accm[i] = _mm512_setzero_ps();
    xq[i] = a.q + (t + i) * a.stride;
    xb[i] = a.bsums + (t + i) * blocks * 16;
    xd[i] = a.d + (t + i) * blocks;
  }
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* blk = panel + b * kL.block();
    // The block's first line first: the stream is read in ascending order.
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk)));
    const __m512 dmin =
        kSix ? _mm512_setzero_ps()
             : _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + kKpDmin)));
    // Per token, from its 16 bsums: Q4_K / Q5_K's pairs of 32-weight sub-block sums as
    // int16 pairs (|sum| <= 32 * 127), the vpdpwssd operand against the mins; Q6_K's
    // -32 * bsum, each sub-block's starting value (the weights are stored + 32).
    alignas(64) int32_t sums[T][16];
    for (int i = 0; i < T; ++i) {
      const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb[i] + b * 16));
      if constexpr (kSix) {
        _mm512_store_si512(sums[i],
                           _mm512_sub_epi32(_mm512_setzero_si512(),
                                            _mm512_slli_epi32(_mm512_cvtepi16_epi32(bs), 5)));
      } else {
        const __m256i sub = _mm256_madd_epi16(bs, _mm256_set1_epi16(1));  // 8 sub-block sums
        // In each 128-bit lane: its 4 sums as int16, twice; dwords 0, 1, 4, 5 are the pairs.
        _mm256_store_si256(reinterpret_cast<__m256i*>(sums[i]), _mm256_packs_epi32(sub, sub));
      }
    }
    if constexpr (!kSix) {  // the mins' part, finished at once (it needs no weights)
      __m512i msum[T];
      for (int i = 0; i < T; ++i) msum[i] = _mm512_setzero_si512();
      for (int k = 0; k < 4; ++k) {
        const __m512i mn = _mm512_cvtepu8_epi16(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + kKpMins + 32 * k)));
        for (int i = 0; i < T; ++i) {
          msum[i] = _mm512_dpwssd_epi32(msum[i], mn, _mm512_set1_epi32(sums[i][k + k / 2 * 2]));
        }
      }
      for (int i = 0; i < T; ++i) {
        const __m512 da = _mm512_set1_ps(xd[i][b]);
        accm[i] = _mm512_fmadd_ps(_mm512_mul_ps(da, dmin), _mm512_cvtepi32_ps(msum[i]), accm[i]);
      }
    }
    __m512i isum[T];
    for (int i = 0; i < T; ++i) isum[i] = _mm512_setzero_si512();
    for (int c = 0; c < 8; ++c) {
      const uint8_t* ch = blk + kL.header + c * kL.chunk;
      const uint8_t* ahead = blk + kPrefetchBlocks * kL.block() + c * (kL.block() / 8);
      for (int l = 0; l < kL.block() / 8; l += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(ahead + l), _MM_HINT_T0);
      }
      __m512i s0[T], s1[T];  // columns 0-15 and 16-31 of the chunk
      for (int i = 0; i < T; ++i) {
        if constexpr (kSix) {
          s0[i] = _mm512_set1_epi32(sums[i][2 * c]);
          s1[i] = _mm512_set1_epi32(sums[i][2 * c + 1]);
        } else {
          s0[i] = _mm512_setzero_si512();
          s1[i] = _mm512_setzero_si512();
        }
      }
      auto group = [&]<int kG>() {
        __m512i lo, hi;
        chunk_vectors<kType, kG>(ch, lo, hi);
        for (int i = 0; i < T; ++i) {
          const int8_t* q = xq[i] + b * kSuperBlock + 32 * c + 4 * kG;
          s0[i] = _mm512_dpbusd_epi32(s0[i], lo, broadcast4(q));
          s1[i] = _mm512_dpbusd_epi32(s1[i], hi, broadcast4(q + 16));
        }
      };
      group.template operator()<0>();
      group.template operator()<1>();
      group.template operator()<2>();
      group.template operator()<3>();
      if constexpr (kSix) {
        const __m512i sc0 = _mm512_cvtepi8_epi32(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + kKpScales6 + 32 * c)));
        const __m512i sc1 = _mm512_cvtepi8_epi32(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + kKpScales6 + 32 * c + 16)));
        for (int i = 0; i < T; ++i) {
          isum[i] = _mm512_add_epi32(isum[i], _mm512_mullo_epi32(s0[i], sc0));
          isum[i] = _mm512_add_epi32(isum[i], _mm512_mullo_epi32(s1[i], sc1));
        }
      } else {
        const __m512i sc = _mm512_cvtepu8_epi32(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + kKpScales + 16 * c)));
        for (int i = 0; i < T; ++i) {
          isum[i] =
              _mm512_add_epi32(isum[i], _mm512_mullo_epi32(_mm512_add_epi32(s0[i], s1[i]), sc));
        }
      }
    }
    for (int i = 0; i < T; ++i) {
      const __m512 da = _mm512_set1_ps(xd[i][b]);
      acc[i] = _mm512_fmadd_ps(_mm512_mul_ps(da, dw), _mm512_cvtepi32_ps(isum[i]), acc[i]);
    }
  }
  const uint32_t mask = row_mask(w, p);
  for (int i = 0; i < T; ++i) store_tile(y, w.rows, p, t + i, mask, _mm512_sub_ps(acc[i], accm[i]));
}

// Decode streams one panel at a time (as matmul_quant_avx512.cpp's run_tiles, for the same
// reason); prefill shares each panel's unpacked vectors among 6 tokens (measured on Zen 4,
// 1 thread, matmul_bench n = 128: 4 tokens gave Q6_K ~25 % less, 8 no more).
template <TensorType kType, int T>
struct Tile {
  static void run(const PackedWeights& w, const Activations& a, int64_t p, int64_t t, float* y) {
    kpanel_tile<kType, T>(w, a, p, t, y);
  }
};

}  // namespace

void kpanel(const PackedWeights& w, const Activations& a, int64_t p0, int64_t p1, int64_t t0,
            int64_t t1, float* y) {
  kpanel_drive<Tile, 2, 6>(w, a, p0, p1, t0, t1, y);
}

}  // namespace rapide::matmul::avx512
