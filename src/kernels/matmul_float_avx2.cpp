// AVX2 kernels for float weights (F32, F16, BF16) in the panel layout. A ymm holds one
// column of 8 rows, so a 16-row panel is two vectors ("halves"). As in the AVX-512 file,
// each lane accumulates its row's columns in order with one FMA each: bit-exact with the
// scalar reference (BF16 included: the odd column of a pair is added first, as vdpbf16ps
// does, and bf16 products are exact in f32).
#include <immintrin.h>

#include <cstring>

#include "base/fp16.h"
#include "kernels/avx2_common.h"
#include "kernels/matmul_drive.h"
#include "kernels/matmul_internal.h"

namespace rapide::matmul::avx2 {

namespace {

constexpr int64_t kPrefetchBytes = 1024;

struct LoadF32 {
  static constexpr int kBytes = 4;
  static __m256 load(const uint8_t* col, int h) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(col) + h * 8);
  }
};
struct LoadF16 {
  static constexpr int kBytes = 2;
  static __m256 load(const uint8_t* col, int h) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(col + h * 16)));
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
      constexpr int H = 2 * R;
      __m256 acc[H][T];
      for (int h = 0; h < H; ++h) {
        for (int i = 0; i < T; ++i) acc[h][i] = _mm256_setzero_ps();
      }
      const uint8_t* wp[R];
      for (int r = 0; r < R; ++r) wp[r] = w.panel(p + r * stride);
      const float* xs[T];
      for (int i = 0; i < T; ++i) xs[i] = a.f32 + (t + i) * a.stride;
      constexpr int64_t kColBytes = kPanel * Load::kBytes;
      for (int64_t c = 0; c < w.cols; ++c) {
        if ((c * kColBytes) % 64 == 0) {
          for (int r = 0; r < R; ++r) {
            _mm_prefetch(reinterpret_cast<const char*>(wp[r] + c * kColBytes + kPrefetchBytes),
                         _MM_HINT_T0);
          }
        }
        __m256 wv[H];
        for (int h = 0; h < H; ++h) wv[h] = Load::load(wp[h / 2] + c * kColBytes, h % 2);
        for (int i = 0; i < T; ++i) {
          const __m256 xb = _mm256_set1_ps(xs[i][c]);
          for (int h = 0; h < H; ++h) acc[h][i] = _mm256_fmadd_ps(wv[h], xb, acc[h][i]);
        }
      }
      for (int h = 0; h < H; ++h) {
        const int64_t panel = p + h / 2 * stride;
        const uint32_t mask = row_mask(w, panel);
        for (int i = 0; i < T; ++i) store_half(y, w.rows, panel, h % 2, t + i, mask, acc[h][i]);
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
  static void run_strided(const PackedWeights& w, const Activations& a, int64_t p, int64_t stride,
                          int64_t t, float* y) {
    constexpr int H = 2 * R;
    __m256 acc[H][T];
    for (int h = 0; h < H; ++h) {
      for (int i = 0; i < T; ++i) acc[h][i] = _mm256_setzero_ps();
    }
    const uint8_t* wp[R];
    for (int r = 0; r < R; ++r) wp[r] = w.panel(p + r * stride);
    const uint32_t* xs[T];
    for (int i = 0; i < T; ++i) xs[i] = a.bf16 + (t + i) * a.stride;
    const __m256i high = _mm256_set1_epi32(static_cast<int>(0xffff0000u));
    const int64_t pairs = (w.cols + 1) / 2;
    for (int64_t k = 0; k < pairs; ++k) {
      __m256 even[H], odd[H];
      for (int h = 0; h < H; ++h) {
        if (h % 2 == 0) {
          _mm_prefetch(reinterpret_cast<const char*>(wp[h / 2] + k * 64 + kPrefetchBytes),
                       _MM_HINT_T0);
        }
        const __m256i v =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wp[h / 2] + k * 64 + h % 2 * 32));
        even[h] = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
        odd[h] = _mm256_castsi256_ps(_mm256_and_si256(v, high));
      }
      for (int i = 0; i < T; ++i) {
        const uint32_t pair = xs[i][k];
        const __m256 xe = _mm256_set1_ps(f32_from_bits(pair << 16));
        const __m256 xo = _mm256_set1_ps(f32_from_bits(pair & 0xffff0000u));
        for (int h = 0; h < H; ++h) {
          acc[h][i] = _mm256_fmadd_ps(odd[h], xo, acc[h][i]);
          acc[h][i] = _mm256_fmadd_ps(even[h], xe, acc[h][i]);
        }
      }
    }
    for (int h = 0; h < H; ++h) {
      const int64_t panel = p + h / 2 * stride;
      const uint32_t mask = row_mask(w, panel);
      for (int i = 0; i < T; ++i) store_half(y, w.rows, panel, h % 2, t + i, mask, acc[h][i]);
    }
  }
};

// 16 ymm registers: 2 panels x 2 tokens (8 accumulators) for decode, 1 panel x 6 tokens
// (12 accumulators + 2 weight vectors) for batches. Decode's two panels are half the piece
// apart (drive_spread): measured on Zen 5 with these kernels (RAPIDE_ISA=avx2, 2 threads,
// probe 37 GB/s, synth100m, per-step minima summed, alternated in one process) F16 6.11 ->
// 5.29 and 6.27 -> 5.40 ms per token, BF16 6.54 -> 5.55 and 6.49 -> 5.45 ms.
template <template <int, int> class Tile>
void run_tiles(const PackedWeights& w, const Activations& a, int64_t p0, int64_t p1, int64_t t0,
               int64_t t1, float* y, int64_t bytes_per_token) {
  if (t1 - t0 <= 0) return;
  if (t1 - t0 <= 2) {
    drive_spread_tokens<2, 2, Tile>(w, a, p0, p1, t0, t1, y, bytes_per_token);
  } else {
    drive<1, 6, Tile>(w, a, p0, p1, t0, t1, y, bytes_per_token);
  }
}

}  // namespace

void round_f16(const float* x, float* out, int64_t count) {
  int64_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT);
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
  }
  for (; i < count; ++i) out[i] = fp16_to_fp32(fp32_to_fp16(x[i]));
}

// Rounds to nearest even in integer arithmetic (AVX2 has no bf16 conversion); NaNs take the
// scalar path so their payload is quieted exactly like the reference.
void to_bf16(const float* x, uint32_t* out, int64_t cols) {
  int64_t c = 0;
  const __m256i one = _mm256_set1_epi32(1);
  const __m256i round = _mm256_set1_epi32(0x7fff);
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff);
  const __m256i inf = _mm256_set1_epi32(0x7f800000);
  for (; c + 16 <= cols; c += 16) {
    const __m256i v0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + c));
    const __m256i v1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + c + 8));
    const __m256i nan = _mm256_or_si256(_mm256_cmpgt_epi32(_mm256_and_si256(v0, abs_mask), inf),
                                        _mm256_cmpgt_epi32(_mm256_and_si256(v1, abs_mask), inf));
    if (!_mm256_testz_si256(nan, nan)) break;
    auto to16 = [&](__m256i v) {
      const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(v, 16), one);
      return _mm256_srli_epi32(_mm256_add_epi32(v, _mm256_add_epi32(round, lsb)), 16);
    };
    // packus interleaves 128-bit lanes; the permute restores column order.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(to16(v0), to16(v1)), 0xd8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + c / 2), packed);
  }
  scalar::to_bf16(x + c, out + c / 2, cols - c);
}

void f32(const PackedWeights& w, const Activations& a, int64_t p0, int64_t p1, int64_t t0,
         int64_t t1, float* y) {
  run_tiles<F32Tile>(w, a, p0, p1, t0, t1, y, a.stride * 4);
}

void f16(const PackedWeights& w, const Activations& a, int64_t p0, int64_t p1, int64_t t0,
         int64_t t1, float* y) {
  run_tiles<F16Tile>(w, a, p0, p1, t0, t1, y, a.stride * 4);
}

void bf16(const PackedWeights& w, const Activations& a, int64_t p0, int64_t p1, int64_t t0,
          int64_t t1, float* y) {
  run_tiles<Bf16Tile>(w, a, p0, p1, t0, t1, y, a.stride * 4);
}

}  // namespace rapide::matmul::avx2
