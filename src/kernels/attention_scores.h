// The score shaping between q·K and the softmax that some architectures add, shared by the
// scalar and SIMD attention kernels so every kernel does it with the same arithmetic:
//   * soft-capping (gemma2): s -> cap * tanh(s * (1 / cap)), as llama.cpp's graph computes it
//     (scale by the reciprocal, tanhf, scale back);
//   * a sliding window: keys before n - window get -inf, so they weigh exactly nothing.
// Applied to one query's scores [0, n), already multiplied by the job's scale.
#pragma once

#include <algorithm>
#include <cmath>

namespace rapide {

// Returns the first position the query sees (0 without a window).
inline int shape_attention_scores(float* scores, int n, int window, float softcap) {
  const int first = window > 0 ? std::max(0, n - window) : 0;
  std::fill(scores, scores + first, -INFINITY);
  if (softcap > 0.0f) {
    const float inv = 1.0f / softcap;
    for (int p = first; p < n; ++p) scores[p] = std::tanh(scores[p] * inv) * softcap;
  }
  return first;
}

}  // namespace rapide
