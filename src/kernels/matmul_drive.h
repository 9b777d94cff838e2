// The loop nest shared by the SIMD matmul kernels: walks a block of panels x tokens in
// register tiles of R panels x T tokens, calling Tile<R, T>::run(w, a, panel, token, y).
//
// Tokens are taken in chunks whose activations fit in L2, and within a chunk each group of
// R panels is multiplied by every token tile before moving on: the panels' weights are read
// from memory once per chunk and reused from cache by the following tiles.
// Included only by the per-ISA kernel files; the anonymous namespace keeps each file's
// instantiations (compiled with different -m flags) apart.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>

#include "kernels/matmul_internal.h"

namespace rapide::matmul {
namespace {

using TileFn = void (*)(const PackedWeights&, const Activations&, int64_t, int64_t, float*);

template <int R, int kT, template <int, int> class Tile, int... Ts>
constexpr auto make_tile_table(std::integer_sequence<int, Ts...>) {
  return std::array<TileFn, sizeof...(Ts)>{&Tile<R, Ts + 1>::run...};
}

// The tokens are cut into ceil(count / kT) tiles whose sizes differ by at most one, not into
// full tiles plus a remainder: 32 decode rows with kT = 6 run as 2 x 6 + 4 x 5 instead
// of 5 x 6 + 2, whose 2-token tile has a third of the accumulators to hide latency with and
// cost as much as a full one. A token's arithmetic does not depend on its tile's size.
struct TileCut {
  int64_t tiles, size, larger;  // `larger` tiles of size + 1 first, then tiles of size
  TileCut(int64_t count, int kT)
      : tiles((count + kT - 1) / kT), size(count / tiles), larger(count % tiles) {}
  int64_t tokens(int64_t i) const { return size + (i < larger ? 1 : 0); }
};

// Tokens per chunk of a batch, a multiple of kT: the chunk's activations stay in L2 while
// every panel of the range passes over them.
inline int64_t chunk_tokens(int64_t bytes_per_token, int kT) {
  constexpr int64_t kChunkBytes = 192 * 1024;
  const int64_t chunk = kChunkBytes / (bytes_per_token > 0 ? bytes_per_token : 1) / kT * kT;
  return chunk < kT ? kT : chunk;
}

template <int R, int kT, template <int, int> class Tile>
void tokens_loop(const PackedWeights& w, const Activations& a, int64_t p, int64_t t0, int64_t t1,
                 float* y) {
  static constexpr auto table = make_tile_table<R, kT, Tile>(std::make_integer_sequence<int, kT>());
  const int64_t count = t1 - t0;
  if (count <= 0) return;
  const TileCut cut(count, kT);
  int64_t t = t0;
  for (int64_t i = 0; i < cut.tiles; ++i) {
    const int64_t n = cut.tokens(i);
    if (n == kT) {
      Tile<R, kT>::run(w, a, p, t, y);
    } else {
      table[n - 1](w, a, p, t, y);
    }
    t += n;
  }
}

// bytes_per_token: activation bytes one token occupies (to size the L2 chunk).
template <int R, int kT, template <int, int> class Tile>
void drive(const PackedWeights& w, const Activations& a, int64_t p0, int64_t p1, int64_t t0,
           int64_t t1, float* y, int64_t bytes_per_token) {
  const int64_t chunk = chunk_tokens(bytes_per_token, kT);
  for (int64_t c0 = t0; c0 < t1; c0 += chunk) {
    const int64_t c1 = c0 + chunk < t1 ? c0 + chunk : t1;
    int64_t p = p0;
    for (; p + R <= p1; p += R) tokens_loop<R, kT, Tile>(w, a, p, c0, c1, y);
    // A wide tile's leftover panels: two at once where possible (a thread's range often
    // leaves two), as a single panel has a third of the accumulators to hide latency with.
    if constexpr (R > 2) {
      if (p + 2 <= p1) {
        tokens_loop<2, kT, Tile>(w, a, p, c0, c1, y);
        p += 2;
      }
    }
    for (; p < p1; ++p) tokens_loop<1, kT, Tile>(w, a, p, c0, c1, y);
  }
}

// What a token tile of a group of R panels prefetches besides its own work (drive_ahead):
// `per_step` lines of 64 bytes of the next group per step of its loop over the columns,
// from `base` on (nullptr: none), and, in the group's first tile (`first`), its own
// panels some steps ahead as well.
struct NextPanels {
  const uint8_t* base = nullptr;
  int64_t per_step = 0;
  bool first = false;

  // Issues the lines of step k of the tile's loop.
  void prefetch(int64_t k) const {
    if (base == nullptr) return;
    const uint8_t* lines = base + k * per_step * 64;
    for (int64_t i = 0; i < per_step; ++i) {
      _mm_prefetch(reinterpret_cast<const char*>(lines + i * 64), _MM_HINT_T0);
    }
  }
};

template <int R, int kT, template <int, int> class Tile, int... Ts>
constexpr auto make_ahead_table(std::integer_sequence<int, Ts...>) {
  using Fn = void (*)(const PackedWeights&, const Activations&, int64_t, int64_t, float*,
                      const NextPanels&);
  return std::array<Fn, sizeof...(Ts)>{&Tile<R, Ts + 1>::run_ahead...};
}

// drive() for a batch whose token tiles reuse each group of R panels only a few times (32
// decode rows: 6 tiles). The first tile of a group found its panels in DRAM and waited: at
// 6 tiles one thread's demand during it is ~6x its average, above what one core streams.
// Here every tile of a group also prefetches an equal slice of the next group's bytes,
// spread over its steps (Tile<R, T>::steps(w) of them, run_ahead(..., next) issuing
// next.per_step lines per step), so a group arrives in cache during the previous group's
// arithmetic at the average rate. The next group is the panels after this one in the same
// matrix (a thread's pieces are consecutive there: ThreadPool::parallel_ranges); a group
// whose panels were not prefetched (a piece's first, the matrix's, one taken from another
// thread) is covered by its first tile's own prefetch.
template <int R, int kT, template <int, int> class Tile>
void drive_ahead(const PackedWeights& w, const Activations& a, int64_t p0, int64_t p1, int64_t t0,
                 int64_t t1, float* y, int64_t bytes_per_token) {
  static constexpr auto table =
      make_ahead_table<R, kT, Tile>(std::make_integer_sequence<int, kT>());
  const int64_t chunk = chunk_tokens(bytes_per_token, kT);
  const int64_t steps = Tile<R, kT>::steps(w);
  for (int64_t c0 = t0; c0 < t1; c0 += chunk) {
    const int64_t c1 = c0 + chunk < t1 ? c0 + chunk : t1;
    const TileCut cut(c1 - c0, kT);  // as tokens_loop cuts them
    int64_t p = p0;
    for (; p + R <= p1; p += R) {
      NextPanels next;
      const int64_t next_panels = std::min<int64_t>(R, w.panels - (p + R));
      int64_t lines = 0;
      if (next_panels > 0) {
        next.base = w.panel(p + R);
        lines = (next_panels * w.panel_bytes + 63) / 64;
        next.per_step = (lines + cut.tiles * steps - 1) / (cut.tiles * steps);
      }
      int64_t t = c0;
      for (int64_t i = 0; i < cut.tiles; ++i) {
        const int64_t n = cut.tokens(i);
        next.first = i == 0;
        table[n - 1](w, a, p, t, y, next);
        // The next tile takes the following slice; past the group's end, nothing (the last
        // slice may run past it by less than a slice: a prefetch never faults).
        if (next.base != nullptr) {
          const int64_t done = (i + 1) * steps * next.per_step;
          next.base = done < lines ? next.base + steps * next.per_step * 64 : nullptr;
        }
        t += n;
      }
    }
    for (; p < p1; ++p) tokens_loop<1, kT, Tile>(w, a, p, c0, c1, y);
  }
}

// A few tokens (T = t1 - t0, one tile of them all: decode, a speculative verification, a
// handful of sequences) by tiles of R panels that stream from DRAM: the R panels of a tile
// are 1/R of [p0, p1) apart, so each of the R streams runs on through its part instead of
// ending after one panel (adjacent panels: R new streams every R x 16 rows, each to be found
// by the hardware prefetcher again). The panels left over (fewer than R per part) go through
// drive. Tile<R, T>::run_strided(w, a, p, stride, t, y) multiplies panels p, p + stride, ...,
// p + (R - 1) * stride.
template <int R, int T, template <int, int> class Tile>
void drive_spread(const PackedWeights& w, const Activations& a, int64_t p0, int64_t p1, int64_t t0,
                  int64_t t1, float* y, int64_t bytes_per_token) {
  const int64_t part = (p1 - p0) / R;
  for (int64_t i = 0; i < part; ++i) Tile<R, T>::run_strided(w, a, p0 + i, part, t0, y);
  if (p0 + R * part < p1) drive<R, T, Tile>(w, a, p0 + R * part, p1, t0, t1, y, bytes_per_token);
}

// drive_spread for the t1 - t0 tokens, 1 to kMaxT, chosen at run time.
template <int R, int kMaxT, template <int, int> class Tile, int... Ts>
constexpr auto make_spread_table(std::integer_sequence<int, Ts...>) {
  using Fn = void (*)(const PackedWeights&, const Activations&, int64_t, int64_t, int64_t, int64_t,
                      float*, int64_t);
  return std::array<Fn, sizeof...(Ts)>{&drive_spread<R, Ts + 1, Tile>...};
}
template <int R, int kMaxT, template <int, int> class Tile>
void drive_spread_tokens(const PackedWeights& w, const Activations& a, int64_t p0, int64_t p1,
                         int64_t t0, int64_t t1, float* y, int64_t bytes_per_token) {
  static constexpr auto table =
      make_spread_table<R, kMaxT, Tile>(std::make_integer_sequence<int, kMaxT>());
  table[t1 - t0 - 1](w, a, p0, p1, t0, t1, y, bytes_per_token);
}

// Mask of the valid rows of panel p (all 16 except in the last, padded panel).
inline uint32_t row_mask(const PackedWeights& w, int64_t p) {
  const int64_t left = w.rows - p * kPanel;
  return left >= kPanel ? 0xffffu : (1u << left) - 1;
}

}  // namespace
}  // namespace rapide::matmul
