// Integer P·V over a quantized (q8_0 / q4_0) KV cache: how the softmax probabilities are
// quantized so that they can multiply the value codes in integer dot products.
//
// A value is d[pos, g] * (code[pos, i] - offset) (kv/kv_store.h), so the weight of
// position pos in group g is w = p[pos] * d[pos, g]: the per-position scale folds into the
// probability, and the sum over positions becomes, per chunk of positions (below) and per
// group,
//     out[i] += step * float(sum_pos wq[pos] * code'[pos, i] - offset_sum)
// with m = max |w| over the chunk, step = m * (1 / 127), wq = nearbyint(w * (127 / m)) in
// [-127, 127] (0 when m is 0), and
//   * q8_0: code' = code - 128 (signed), offset_sum = 0. Its scales are amax / 127 >= 0, so
//     wq is in [0, 127] and is vpdpbusd's unsigned operand, the signed codes the other;
//   * q4_0: code' = code (the unsigned nibble), offset_sum = 8 * sum_pos wq. Its scales have
//     either sign, so wq is the signed operand and the nibbles the unsigned one.
// The integer sums are exact (and stay exact in AVX2's 16-bit pair sums: 2 * 127 * 127 <
// 2^15), so every kernel computes the same integers, in any order; the float steps (w, m,
// step, 127 / m, the rounding to nearest even, one fma per chunk) are done in the same order
// by the scalar kernel and the SIMD ones.
//
// Chunks: with blocks of a multiple of 4 positions shorter than kValueChunk, a chunk is the
// whole blocks that fit in kValueChunk positions (2 blocks of 16), at multiples of that
// length; otherwise pieces of kValueChunk positions of one block, from the block's start
// (a block of 100: 32, 32, 32, 4). Either way a chunk is whole quads of positions except at
// its end, and its boundaries depend only on positions: a query's chunks, hence its output,
// do not depend on the job it lands in (batch invariance). The cost per chunk (a maximum
// and a conversion per group and query) is what the integer sums must amortize, hence
// chunks longer than the 16-position default block.
//
// Accuracy: 7 bits per weight relative to the chunk's largest, on top of the cache's own
// rounding; the figures are in docs/kv-cache.md.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace rapide {

// Positions whose probabilities share one quantization step (a multiple of 4: whole quads).
constexpr int kValueChunk = 32;
// The largest weight code.
constexpr float kValueWeightMax = 127.0f;

// step and 1/step of a chunk whose largest |weight| is `max_weight`.
struct ValueWeightScale {
  float step = 0.0f;
  float inverse = 0.0f;
};
inline ValueWeightScale value_weight_scale(float max_weight) {
  if (!(max_weight > 0.0f)) return {};
  return {max_weight * (1.0f / kValueWeightMax), kValueWeightMax / max_weight};
}

// Where the chunk that contains position `pos` starts, and where the chunk starting at
// `start` ends (not clamped to the sequence).
inline int value_chunk_start(int pos, int block_size) {
  if (block_size % 4 == 0 && block_size < kValueChunk) {
    const int length = kValueChunk / block_size * block_size;
    return pos / length * length;
  }
  const int block_start = pos / block_size * block_size;
  return block_start + (pos - block_start) / kValueChunk * kValueChunk;
}
inline int value_chunk_end(int start, int block_size) {
  if (block_size % 4 == 0 && block_size < kValueChunk) {
    return start + kValueChunk / block_size * block_size;
  }
  const int block_end = (start / block_size + 1) * block_size;
  return start + kValueChunk < block_end ? start + kValueChunk : block_end;
}

// The weight code of `w` (|w * inverse| <= 127): round to nearest, ties to even, as the
// SIMD conversions do in the default rounding mode.
inline int8_t value_weight_code(float w, float inverse) {
  return static_cast<int8_t>(std::nearbyint(w * inverse));
}

// The first KV block any attention kernel reads for a query that sees `n_positions`
// positions through a sliding `window` (0: none, all blocks). Keys before the window are
// skipped a whole block at a time and values from the chunk that holds the first visible
// block's start (the scalar kernel starts later still), so blocks before this one are never
// read: a KV cache may free them once no later query can see them (PagedKvStore).
inline int first_block_read(int n_positions, int window, int block_size) {
  if (window <= 0) return 0;
  const int first_key = std::max(0, n_positions - window) / block_size * block_size;
  return value_chunk_start(first_key, block_size) / block_size;
}

}  // namespace rapide
