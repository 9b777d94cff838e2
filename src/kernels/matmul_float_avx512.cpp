// AVX-512 kernels for float weights (F32, F16, BF16) in the panel layout: each zmm holds
// one column of 16 rows, multiplied by one activation value broadcast from memory.
//
// Per-lane accumulation runs over the columns in order with one FMA each, exactly like the
// scalar reference, so F32/F16 results match it bit for bit. BF16 uses vdpbf16ps (two
// columns per instruction, AVX512-BF16) on activations rounded to bf16, as llama.cpp does.
#include "kernels/avx512_common.h"
#include "kernels/matmul_drive.h"
#include "kernels/matmul_internal.h"

namespace rapide::matmul::avx512 {

namespace {

// Bytes ahead of the current column at which each panel stream is prefetched: far enough
// to cover memory latency at decode, when every weight byte comes from DRAM. The F32/F16
// tiles prefetch only with several panels: a lone (leftover) panel is one contiguous
// stream, which the hardware prefetcher follows without help.
constexpr int64_t kPrefetchBytes = 1024;
// F16 panels (half the bytes per column of F32) reach further: measured on Zen 5 (2 threads,
// synth100m F16, decode step times alternated in one process, sum of per-step minima):
// 2048 bytes 3.22 / 3.35 ms per token against 3.27 / 3.49 at 1024; 3072 and 4096 slower.
// BF16 measured best at 1024 (2.97 against 3.02 ms at 2048).
constexpr int64_t kPrefetchBytesF16 = 2048;

struct LoadF32 {
  static constexpr int kBytes = 4;
  static constexpr int64_t kPrefetch = kPrefetchBytes;
  static __m512 load(const uint8_t* p) { return _mm512_loadu_ps(p); }
};
struct LoadF16 {
  static constexpr int kBytes = 2;
  static constexpr int64_t kPrefetch = kPrefetchBytesF16;
  static __m512 load(const uint8_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
};

template <typename Load>
struct FloatTiles {
  template <int R, int T>
  struct Tile {
    static void run(const PackedWeights& w, const Activations& a, int64_t p, int64_t t, float* y) {
      run_strided(w, a, p, 1, t, y);
    }
    // Panels p, p + stride, ..., p + (R - 1) * stride (run: adjacent ones).
    static void run_strided(const PackedWeights& w, const Activations& a, int64_t p, int64_t stride,
                            int64_t t, float* y) {
      __m512 acc[R][T];
      for (int r = 0; r < R; ++r) {
        for (int i = 0; i < T; ++i) acc[r][i] = _mm512_setzero_ps();
      }
      const uint8_t* wp[R];
      for (int r = 0; r < R; ++r) wp[r] = w.panel(p + r * stride);
      const float* xs[T];
      for (int i = 0; i < T; ++i) xs[i] = a.f32 + (t + i) * a.stride;
      constexpr int64_t kColBytes = kPanel * Load::kBytes;
      for (int64_t c = 0; c < w.cols; ++c) {
        if (R > 1 && (c * kColBytes) % 64 == 0) {
          for (int r = 0; r < R; ++r) {
            _mm_prefetch(reinterpret_cast<const char*>(wp[r] + c * kColBytes + Load::kPrefetch),
                         _MM_HINT_T0);
          }
        }
        __m512 wv[R];
        for (int r = 0; r < R; ++r) wv[r] = Load::load(wp[r] + c * kColBytes);
        for (int i = 0; i < T; ++i) {
          const __m512 xb = _mm512_set1_ps(xs[i][c]);
          for (int r = 0; r < R; ++r) acc[r][i] = _mm512_fmadd_ps(wv[r], xb, acc[r][i]);
        }
      }
      for (int r = 0; r < R; ++r) {
        const int64_t panel = p + r * stride;
        const uint32_t mask = row_mask(w, panel);
        for (int i = 0; i < T; ++i) store_tile(y, w.rows, panel, t + i, mask, acc[r][i]);
      }
    }
  };
};

template <int R, int T>
using F32Tile = FloatTiles<LoadF32>::Tile<R, T>;
template <int R, int T>
using F16Tile = FloatTiles<LoadF16>::Tile<R, T>;

template <int R, int T>
struct Bf16Tile {
  static void run(const PackedWeights& w, const Activations& a, int64_t p, int64_t t, float* y) {
    run_strided(w, a, p, 1, t, y);
  }
  // drive_ahead: one step per pair of columns (64 bytes of each panel).
  static int64_t steps(const PackedWeights& w) { return (w.cols + 1) / 2; }
  static void run_ahead(const PackedWeights& w, const Activations& a, int64_t p, int64_t t,
                        float* y, const NextPanels& next) {
    run_strided(w, a, p, 1, t, y, &next);
  }
  // `next` (drive_ahead): the slice of the next group of panels to prefetch, next->per_step
  // lines per pair of columns; the tile's own panels are then prefetched only in the group's
  // first tile.
  static void run_strided(const PackedWeights& w, const Activations& a, int64_t p, int64_t stride,
                          int64_t t, float* y, const NextPanels* next = nullptr) {
    const bool own_prefetch = next == nullptr || next->first;
    __m512 acc[R][T];
    for (int r = 0; r < R; ++r) {
      for (int i = 0; i < T; ++i) acc[r][i] = _mm512_setzero_ps();
    }
    const uint8_t* wp[R];
    for (int r = 0; r < R; ++r) wp[r] = w.panel(p + r * stride);
    const uint32_t* xs[T];
    for (int i = 0; i < T; ++i) xs[i] = a.bf16 + (t + i) * a.stride;
    const int64_t pairs = (w.cols + 1) / 2;
    for (int64_t k = 0; k < pairs; ++k) {
      __m512bh wv[R];
      for (int r = 0; r < R; ++r) {
        if (own_prefetch) {
          _mm_prefetch(reinterpret_cast<const char*>(wp[r] + k * 64 + kPrefetchBytes), _MM_HINT_T0);
        }
        wv[r] = reinterpret_cast<__m512bh>(_mm512_loadu_si512(wp[r] + k * 64));
      }
      if (next != nullptr) next->prefetch(k);
      for (int i = 0; i < T; ++i) {
        const __m512bh xb =
            reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(xs[i][k])));
        for (int r = 0; r < R; ++r) acc[r][i] = _mm512_dpbf16_ps(acc[r][i], wv[r], xb);
      }
    }
    for (int r = 0; r < R; ++r) {
      const int64_t panel = p + r * stride;
      const uint32_t mask = row_mask(w, panel);
      for (int i = 0; i < T; ++i) store_tile(y, w.rows, panel, t + i, mask, acc[r][i]);
    }
  }
};

// Few tokens: four prefetched panels at once, for every type. F16 once
// streamed a single panel, but with one token its tile is one FMA chain, 4 cycles of latency
// per 32-byte column: about 27 GB/s per thread at 3.4 GHz, below a fast minute's share of
// DRAM. Measured on Zen 5 (2 threads, synth100m F16, bench_speed_report decode against the
// probe of the same minute, 3 alternated rounds): 1 panel 187-207 tok/s (60-68 % of the
// probe), 4 panels 229-252 tok/s (81-93 %), 2 panels 181-190, 6 or 8 panels worse than 4.
// Four chains hide the latency; the per-lane order over the columns does not change.
// The four are a quarter of the piece apart (drive_spread in matmul_drive.h): with adjacent panels
// the four streams ended after one panel each (24 KiB of F16 at dim 768) and four new ones began.
// Measured on Zen 5 (2 threads, per-step minima summed, alternated in one process): at probe
// 62-69 GB/s F16 3.61 -> 3.14 and 3.49 -> 3.05 ms per token, BF16 3.48 -> 3.28 and 3.53 ->
// 3.25 ms; at 31-32 GB/s F16 5.62 -> 5.20 and 5.87 -> 5.52, BF16 5.50 -> 5.16 and 5.25 -> 5.07.
// Larger decode pieces (so that small matrices get longer quarters too) gained nothing more.
//
// A few tokens (a speculative verification's k + 1 rows, a handful of sequences): one tile
// takes every token, so each panel is streamed from DRAM once, as at decode: 4 panels x up to
// 6 tokens, then 2 x 12. Measured on Zen 5 (2 threads, synth100m, decode steps of n
// sequences, per-step minima of runs alternated in one process): F16 n = 3 / 5 / 9 at
// 3.87 / 4.36 / 7.01 ms per step against 4.26 / 4.93 / 8.19 with 3 x 8 tiles; BF16 n = 3 / 5
// at 3.64 / 4.04 against 4.41 / 4.99 with 2 x 12 (n = 9 the same). Their four panels are
// spread too: F16 n = 3 / 5 4.02 -> 3.76 and 4.41 -> 4.26 ms, BF16 3.84 -> 3.64 and 4.19 ->
// 4.11 ms (probe 56-60 GB/s); so are the 2 x 12 tiles' two: n = 8 F16 6.90 -> 6.51, BF16
// 6.67 -> 5.80 ms (probe 54-55 GB/s).
//
// Many tokens: PR panels x PT tokens = 24 accumulators. F16 uses 3 x 8: on Zen 4 (1 thread,
// CPU time, synth100m, n = 128) it reached 91 % of the measured zmm FMA peak against 81 %
// for 2 x 12 (4 x 6 matched 3 x 8); 8 token rows of activations stay in L1 where 12 do not,
// and per 24 FMAs it issues 11 loads instead of 14. On Ice Lake, whose vcvtph2ps takes the
// FMA ports, 3 x 8 costs 30 FMA-port uops per 24 FMAs against 32 for 4 x 6.
template <template <int, int> class Tile, int PR = 2, int PT = 12>
void run_tiles(const PackedWeights& w, const Activations& a, int64_t p0, int64_t p1, int64_t t0,
               int64_t t1, float* y, int64_t bytes_per_token) {
  const int64_t t = t1 - t0;
  if (t <= 0) return;
  if (t <= 6) {  // one tile of every token
    drive_spread_tokens<4, 6, Tile>(w, a, p0, p1, t0, t1, y, bytes_per_token);
  } else if (t <= 12) {
    drive_spread_tokens<2, 12, Tile>(w, a, p0, p1, t0, t1, y, bytes_per_token);
  } else {
    drive<PR, PT, Tile>(w, a, p0, p1, t0, t1, y, bytes_per_token);
  }
}

}  // namespace

void round_f16(const float* x, float* out, int64_t count) {
  int64_t i = 0;
  for (; i + 16 <= count; i += 16) {
    const __m256i h = _mm512_cvtps_ph(_mm512_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT);
    _mm512_storeu_ps(out + i, _mm512_cvtph_ps(h));
  }
  if (i < count) {
    const __mmask16 m = static_cast<__mmask16>((1u << (count - i)) - 1);
    const __m256i h = _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, x + i), _MM_FROUND_TO_NEAREST_INT);
    _mm512_mask_storeu_ps(out + i, m, _mm512_cvtph_ps(h));
  }
}

void to_bf16(const float* x, uint32_t* out, int64_t cols) {
  for (int64_t c = 0; c < cols; c += 32) {
    const int64_t left = cols - c;
    const __mmask16 m0 = static_cast<__mmask16>(left >= 16 ? 0xffff : (1u << left) - 1);
    const __mmask16 m1 = static_cast<__mmask16>(left >= 32  ? 0xffff
                                                : left > 16 ? (1u << (left - 16)) - 1
                                                            : 0);
    const __m512 lo = _mm512_maskz_loadu_ps(m0, x + c);
    const __m512 hi = _mm512_maskz_loadu_ps(m1, x + c + 16);
    const __m512i packed = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(hi, lo));
    const int64_t pairs = left >= 32 ? 16 : (left + 1) / 2;
    const __mmask16 pm = static_cast<__mmask16>(pairs == 16 ? 0xffff : (1u << pairs) - 1);
    _mm512_mask_storeu_epi32(out + c / 2, pm, packed);
  }
}

void f32(const PackedWeights& w, const Activations& a, int64_t p0, int64_t p1, int64_t t0,
         int64_t t1, float* y) {
  run_tiles<F32Tile>(w, a, p0, p1, t0, t1, y, a.stride * 4);
}

void f16(const PackedWeights& w, const Activations& a, int64_t p0, int64_t p1, int64_t t0,
         int64_t t1, float* y) {
  run_tiles<F16Tile, 3, 8>(w, a, p0, p1, t0, t1, y, a.stride * 4);
}

void bf16(const PackedWeights& w, const Activations& a, int64_t p0, int64_t p1, int64_t t0,
          int64_t t1, float* y) {
  // A batch's tiles reuse each group of panels a few times (3 at 32 rows): each group
  // is prefetched during the previous group's tiles (drive_ahead, as the Q8_0/Q4_0 tiles).
  // matmul_bench BM_ModelMatmuls BF16, Zen 5, with and without alternated: 1 thread n = 32
  // 298-301 -> 323-341 GFLOP/s, n = 128 345-356 -> 357-366; 2 threads n = 32 514-523 ->
  // 548-573, n = 128 656-663 -> 687-688 (one run of three 601).
  // Tiles of 2 panels x 8 tokens, not 12: as for F16 (above run_tiles), 8 rows of activations
  // stay in L1 next to the panels. Zen 5, the two alternated in one process: matmul_bench
  // n = 128 1 thread 386 -> 398 and 396 -> 401 GFLOP/s (median), 2 threads 716 -> 734 and
  // 714 -> 737; a 128-token BF16 prefill 3,583 -> 3,721 and 3,663 -> 3,835 tok/s (median of
  // 40), F16 --act-quant bf16 3,591 -> 3,779, a 512-token one 3,373 -> 3,518; the 32-row
  // step 13.57 -> 13.22 ms. Tiles of 6, 7 or 14 tokens measured slower than 12, 10 the same.
  if (t1 - t0 > 12) return drive_ahead<2, 8, Bf16Tile>(w, a, p0, p1, t0, t1, y, a.stride * 4);
  run_tiles<Bf16Tile>(w, a, p0, p1, t0, t1, y, a.stride * 4);
}

}  // namespace rapide::matmul::avx512
