// AVX-512 VNNI kernels for Q8_0 / Q4_0 weights times Q8_0-quantized activations.
//
// vpdpbusd multiplies unsigned bytes (first operand) by signed bytes (second) and sums
// groups of 4 into 32-bit lanes. Activations are the signed operand, broadcast 4 bytes at a
// time from memory; weights are unsigned: Q8_0 is packed as w + 128 (sign bit flipped at
// prepare time), Q4_0 nibbles are already 0..15 (w + 8). The excess offset * sum(activations) of a
// block is removed by starting the block's accumulator at the precomputed bias -offset * sum(q), so
// each lane ends the block holding the exact integer dot product. Blocks are then scaled and summed
// in the reference's order: bit-exact with it.
#include <cstring>

#include "base/fp16.h"
#include "kernels/avx512_common.h"
#include "kernels/matmul_drive.h"
#include "kernels/matmul_internal.h"

namespace rapide::matmul::avx512 {

namespace {

// Blocks ahead of the current one at which the multi-panel (batched) tiles prefetch their
// panels. A batch of 32 decode rows reuses each panel from cache for only ~6 token tiles
// (a 128-token prefill for ~22), so the first tile's wait for DRAM weighed ~4x more per
// token. Measured on Zen 5 (1 thread, CPU time, matmul_bench BM_ModelMatmuls, medians of 3
// paired runs): Q8_0 n = 32 13.66 -> 11.95 ms (4 blocks ahead; 8 a further 1 %), Q4_0
// 11.97 -> 10.98 ms, n = 128 2-3 % faster. Later tiles find the lines in L1 already.
constexpr int64_t kPrefetchBlocks = 8;

template <typename Weights, int R>
inline void prefetch_ahead(const uint8_t* const (&pb)[R]) {
  for (int r = 0; r < R; ++r) {
    const uint8_t* ahead = pb[r] + kPrefetchBlocks * Weights::kBlockBytes;
    for (int64_t off = 0; off < Weights::kBlockBytes; off += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(ahead + off), _MM_HINT_T0);
    }
  }
}

// Shared by both types: Weights::dot(iacc, block, xs, b) adds one block's integer products.
// `next` (drive_ahead): the slice of the next group of panels to prefetch, one block's
// share per block; without it, a multi-panel tile prefetches its own panels ahead.
template <typename Weights, int R, int T>
void quant_tile(const PackedWeights& w, const Activations& a, int64_t p, int64_t stride, int64_t t,
                float* y, const NextPanels* next = nullptr) {
  __m512 acc[R][T];
  for (int r = 0; r < R; ++r) {
    for (int i = 0; i < T; ++i) acc[r][i] = _mm512_setzero_ps();
  }
  const uint8_t* wp[R];
  for (int r = 0; r < R; ++r) wp[r] = w.panel(p + r * stride);
  const int8_t* xs[T];
  const float* ds[T];
  const int32_t* bs[T];
  for (int i = 0; i < T; ++i) {
    xs[i] = a.q + (t + i) * a.stride;
    ds[i] = a.d + (t + i) * a.blocks;
    bs[i] = a.bias + (t + i) * a.blocks;
  }
  const int64_t blocks = w.blocks();
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* pb[R];
    for (int r = 0; r < R; ++r) pb[r] = wp[r] + b * Weights::kBlockBytes;
    if constexpr (R > 1) {
      if (next == nullptr || next->first) prefetch_ahead<Weights, R>(pb);
      if (next != nullptr) next->prefetch(b);
    }
    if constexpr (R == 1 && Weights::kDecodePrefetchBlocks > 0) {
      const uint8_t* ahead = pb[0] + Weights::kDecodePrefetchBlocks * Weights::kBlockBytes;
      for (int64_t off = 0; off < Weights::kBlockBytes; off += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(ahead + off), _MM_HINT_T0);
      }
    }
    __m512i iacc[R][T];
    for (int i = 0; i < T; ++i) {
      const __m512i bias = _mm512_set1_epi32(bs[i][b]);
      for (int r = 0; r < R; ++r) iacc[r][i] = bias;
    }
    Weights::template dot<R, T>(iacc, pb, xs, b * kQuantBlock);
    __m512 dw[R];
    for (int r = 0; r < R; ++r) {
      dw[r] = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(pb[r])));
    }
    for (int i = 0; i < T; ++i) {
      const __m512 da = _mm512_set1_ps(ds[i][b]);
      for (int r = 0; r < R; ++r) {
        acc[r][i] =
            _mm512_fmadd_ps(_mm512_cvtepi32_ps(iacc[r][i]), _mm512_mul_ps(dw[r], da), acc[r][i]);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    const int64_t panel = p + r * stride;
    const uint32_t mask = row_mask(w, panel);
    for (int i = 0; i < T; ++i) store_tile(y, w.rows, panel, t + i, mask, acc[r][i]);
  }
}

struct Q8Weights {
  static constexpr int64_t kBlockBytes = kQ8PanelBlockBytes;
  static constexpr int64_t kDecodePrefetchBlocks = 0;  // see Q4Weights
  template <int R, int T>
  static void dot(__m512i (&iacc)[R][T], const uint8_t* const (&pb)[R],
                  const int8_t* const (&xs)[T], int64_t col) {
    for (int g = 0; g < 8; ++g) {
      __m512i wv[R];  // stored as q + 128 already
      for (int r = 0; r < R; ++r) wv[r] = _mm512_loadu_si512(pb[r] + 2 * kPanel + g * 64);
      for (int i = 0; i < T; ++i) {
        const __m512i xb = broadcast4(xs[i] + col + 4 * g);
        for (int r = 0; r < R; ++r) iacc[r][i] = _mm512_dpbusd_epi32(iacc[r][i], wv[r], xb);
      }
    }
  }
};

struct Q4Weights {
  static constexpr int64_t kBlockBytes = kQ4PanelBlockBytes;
  // Decode (one panel at a time) prefetches 16 blocks (4.6 KiB) ahead of the block it
  // computes: unpacking nibbles costs more instructions per byte than Q8_0, and the hardware
  // prefetcher alone let the stream fall behind. Measured on Zen 5 (2 threads, synth100m
  // Q4_0, bench_speed_report: the sum over 64 decode steps of each step's fastest time, with
  // and without alternating run by run in one process): at probe 33-36 GB/s 1.46 -> 1.20 and
  // 1.51 -> 1.25 ms per token (4 blocks ahead 1.47, 8 1.32, 24 1.22-1.33, 32 1.23-1.29); at
  // 51-67 GB/s 1.08 -> 0.96 and 1.00 -> 0.92 ms. Q8_0 measured slower with it (4-32 blocks
  // ahead, 0-20 %): it keeps the hardware prefetcher alone. The blocks prefetched past a
  // panel's end are the next panel's, or nothing (a prefetch never faults).
  static constexpr int64_t kDecodePrefetchBlocks = 16;
  template <int R, int T>
  static void dot(__m512i (&iacc)[R][T], const uint8_t* const (&pb)[R],
                  const int8_t* const (&xs)[T], int64_t col) {
    const __m512i low = _mm512_set1_epi8(0x0f);
    for (int g = 0; g < 4; ++g) {
      __m512i lo[R], hi[R];
      for (int r = 0; r < R; ++r) {
        const __m512i v = _mm512_loadu_si512(pb[r] + 2 * kPanel + g * 64);
        lo[r] = _mm512_and_si512(v, low);
        hi[r] = _mm512_and_si512(_mm512_srli_epi16(v, 4), low);
      }
      for (int i = 0; i < T; ++i) {
        const __m512i xlo = broadcast4(xs[i] + col + 4 * g);
        const __m512i xhi = broadcast4(xs[i] + col + 16 + 4 * g);
        for (int r = 0; r < R; ++r) {
          iacc[r][i] = _mm512_dpbusd_epi32(iacc[r][i], lo[r], xlo);
          iacc[r][i] = _mm512_dpbusd_epi32(iacc[r][i], hi[r], xhi);
        }
      }
    }
  }
};

// The tiles of one weight type, as drive() and drive_spread() take them.
template <typename Weights>
struct QuantTiles {
  template <int R, int T>
  struct Tile {
    static void run(const PackedWeights& w, const Activations& a, int64_t p, int64_t t, float* y) {
      quant_tile<Weights, R, T>(w, a, p, 1, t, y);
    }
    static void run_strided(const PackedWeights& w, const Activations& a, int64_t p, int64_t stride,
                            int64_t t, float* y) {
      quant_tile<Weights, R, T>(w, a, p, stride, t, y);
    }
    static void run_ahead(const PackedWeights& w, const Activations& a, int64_t p, int64_t t,
                          float* y, const NextPanels& next) {
      quant_tile<Weights, R, T>(w, a, p, 1, t, y, &next);
    }
    static int64_t steps(const PackedWeights& w) { return w.blocks(); }
  };
};
template <int R, int T>
using Q8Tile = QuantTiles<Q8Weights>::Tile<R, T>;
template <int R, int T>
using Q4Tile = QuantTiles<Q4Weights>::Tile<R, T>;

// Decode (1-2 tokens) streams the weights from DRAM once: one panel at a time, so each
// thread reads a single contiguous stream that the hardware prefetcher follows on its own.
// Measured on Zen 4 (1 thread, CPU time, 85 synth100m matrices): 4 panels at once with
// software prefetch reached 60-73 % of the read probe, 1 panel without prefetch 95-108 %;
// software prefetch on top of the single stream only lowered it (77-91 %); on Zen 5 Q4_0
// gains from it (Q4Weights::kDecodePrefetchBlocks says how much), Q8_0 still not. The integer
// chain restarts every block and the f32 chain takes one FMA per 544 bytes, so a single
// panel still has ample independent work for the out-of-order core.
template <template <int, int> class Tile>
void run_tiles(const PackedWeights& w, const Activations& a, int64_t p0, int64_t p1, int64_t t0,
               int64_t t1, float* y) {
  if (t1 - t0 <= 2) {
    drive<1, 2, Tile>(w, a, p0, p1, t0, t1, y, a.stride);
  } else if (t1 - t0 <= 6) {
    // One tile of every token, its two panels streamed from DRAM once: spread over the piece
    // (drive_spread). Measured on Zen 5 (2 threads, probe 59-63 GB/s, synth100m, decode steps
    // of n sequences, per-step minima summed, alternated in one process): Q8_0 n = 3 / 5
    // 2.34 -> 2.09 and 2.70 -> 2.43 ms, Q4_0 1.52 -> 1.34 and 1.83 -> 1.71 ms.
    drive_spread_tokens<2, 6, Tile>(w, a, p0, p1, t0, t1, y, a.stride);
  } else {
    // Each group of panels prefetched during the previous group's tiles (drive_ahead). The
    // in-tile prefetch alone left the first tile of each group waiting on DRAM: matmul_bench
    // BM_ModelMatmuls Q8_0 n = 32 (1 thread) ran at 80 % of its rate with the weights in
    // cache (one matrix: ~590-617 GFLOP/s; all 85 from DRAM: 434-503). Measured on Zen 5,
    // old and new alternated: 1 thread n = 32 485-503 -> 578-588 GFLOP/s, n = 128 575-580
    // -> 597-606; 2 threads n = 32 846-868 -> 966-979. The 32-row decode step (synth100m
    // Q8_0, bench_speed_report, per-step minima alternated in one process) 11.40 -> 9.67 and
    // 11.60 -> 9.83 ms with a q8_0 KV cache, 11.54 -> 10.10 and 11.27 -> 9.73 with f16; a
    // 128-token prefill 4,814 -> 5,100 tok/s (best of 15). Next-group lines to L2 only
    // (prefetcht1) measured 5 % slower than T0 in the step, no own prefetch in the first
    // tile 3 % slower.
    drive_ahead<2, 6, Tile>(w, a, p0, p1, t0, t1, y, a.stride);
  }
}

// Reduces four blocks' vectors (v[k]: block k's lane-wise partial maxima or sums) with
// `combine` in one tree of whole-register shuffles, each block's result in every lane of
// 128-bit lane k: a horizontal reduction per block was most of the quantizer's time. The
// shuffles only move bits, so integer sums go through as floats' bit patterns; max and
// integer addition are exact, so the order does not change the results.
template <typename Combine>
__m512 reduce_four_blocks(const __m512 v[4], Combine combine) {
  const __m512 v01 = combine(_mm512_shuffle_f32x4(v[0], v[1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_f32x4(v[0], v[1], _MM_SHUFFLE(3, 2, 3, 2)));
  const __m512 v23 = combine(_mm512_shuffle_f32x4(v[2], v[3], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_f32x4(v[2], v[3], _MM_SHUFFLE(3, 2, 3, 2)));
  __m512 u = combine(_mm512_shuffle_f32x4(v01, v23, _MM_SHUFFLE(2, 0, 2, 0)),
                     _mm512_shuffle_f32x4(v01, v23, _MM_SHUFFLE(3, 1, 3, 1)));
  u = combine(u, _mm512_permute_ps(u, _MM_SHUFFLE(2, 3, 0, 1)));
  return combine(u, _mm512_permute_ps(u, _MM_SHUFFLE(1, 0, 3, 2)));
}

}  // namespace

void quantize_q8(const float* x, int64_t cols, int bias_offset, int8_t* q, float* d,
                 int32_t* bias) {
  const int64_t blocks = cols / kQuantBlock;
  // Four blocks at a time: per block, the reference's amax, f16-rounded scale amax / 127,
  // codes nearest-even of x * (127 / amax) and bias -offset * sum(codes). A block at a time
  // (the tail's loop below), two horizontal reductions and two scalar divisions per block took
  // 5.3 ns a block on Zen 5, 3.2 ns this way (32 rows of 768, best of 300). In a 128-token
  // Q8_0 prefill (synth100m, 2 threads, best / median of 30-40 alternated in one process)
  // 5,930 / 5,839 -> 5,976 / 5,866 and 6,052 / 5,982 -> 6,084 / 6,029 tok/s; a 32-row
  // decode step 8.43 / 8.57 -> 8.38 / 8.51 and 8.30 / 8.96 -> 8.30 / 8.83 ms (min / median).
  const __m512i first_of_lanes = _mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
  const __m512 d127 = _mm512_set1_ps(127.0f);
  int64_t b = 0;
  for (; b + 4 <= blocks; b += 4) {
    const float* xb = x + b * kQuantBlock;
    __m512 v[4][2], m[4];
    for (int k = 0; k < 4; ++k) {
      v[k][0] = _mm512_loadu_ps(xb + k * kQuantBlock);
      v[k][1] = _mm512_loadu_ps(xb + k * kQuantBlock + 16);
      m[k] = _mm512_max_ps(_mm512_abs_ps(v[k][0]), _mm512_abs_ps(v[k][1]));
    }
    const __m512 amax =
        reduce_four_blocks(m, [](__m512 x, __m512 y) { return _mm512_max_ps(x, y); });
    const __m512 scale = _mm512_cvtph_ps(
        _mm512_cvtps_ph(_mm512_div_ps(amax, d127), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    const __mmask16 nonzero = _mm512_cmp_ps_mask(amax, _mm512_setzero_ps(), _CMP_NEQ_OQ);
    const __m512 inverse = _mm512_maskz_div_ps(nonzero, d127, amax);
    _mm_storeu_ps(d + b, _mm512_castps512_ps128(_mm512_permutexvar_ps(first_of_lanes, scale)));
    __m512 sums[4];  // int32 lanes
    for (int k = 0; k < 4; ++k) {
      const __m512 id = _mm512_permutexvar_ps(_mm512_set1_epi32(4 * k), inverse);
      const __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(v[k][0], id));
      const __m512i q1 = _mm512_cvtps_epi32(_mm512_mul_ps(v[k][1], id));
      int8_t* qb = q + (b + k) * kQuantBlock;
      _mm_storeu_si128(reinterpret_cast<__m128i*>(qb), _mm512_cvtepi32_epi8(q0));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(qb + 16), _mm512_cvtepi32_epi8(q1));
      sums[k] = _mm512_castsi512_ps(_mm512_add_epi32(q0, q1));
    }
    const __m512i sum = _mm512_castps_si512(reduce_four_blocks(sums, [](__m512 x, __m512 y) {
      return _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(x), _mm512_castps_si512(y)));
    }));
    const __m512i total = _mm512_mullo_epi32(sum, _mm512_set1_epi32(-bias_offset));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(bias + b),
                     _mm512_castsi512_si128(_mm512_permutexvar_epi32(first_of_lanes, total)));
  }
  for (; b < blocks; ++b) {
    const float* xb = x + b * kQuantBlock;
    const __m512 v0 = _mm512_loadu_ps(xb);
    const __m512 v1 = _mm512_loadu_ps(xb + 16);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
    // The scale is stored as f16 in llama.cpp's block: round it the same way (F16C, nearest
    // even, as fp32_to_fp16) rather than through the branchy software conversion.
    d[b] = _cvtsh_ss(_cvtss_sh(amax / 127.0f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    const __m512 id = _mm512_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);
    // Default MXCSR rounding is to nearest even, like the reference's nearbyintf.
    const __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(v0, id));
    const __m512i q1 = _mm512_cvtps_epi32(_mm512_mul_ps(v1, id));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + b * kQuantBlock), _mm512_cvtepi32_epi8(q0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + b * kQuantBlock + 16),
                     _mm512_cvtepi32_epi8(q1));
    bias[b] = -bias_offset * _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
  }
}

void q8_0(const PackedWeights& w, const Activations& a, int64_t p0, int64_t p1, int64_t t0,
          int64_t t1, float* y) {
  run_tiles<Q8Tile>(w, a, p0, p1, t0, t1, y);
}

void q4_0(const PackedWeights& w, const Activations& a, int64_t p0, int64_t p1, int64_t t0,
          int64_t t1, float* y) {
  run_tiles<Q4Tile>(w, a, p0, p1, t0, t1, y);
}

}  // namespace rapide::matmul::avx512
