#include "kernels/ops.h"

#include <cmath>

namespace rapide {

void rms_norm(const float* x, const float* weight, int64_t n, float eps, float* out) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  const float scale = 1.0f / std::sqrt(mean + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = (x[i] * scale) * weight[i];
}

void add_in_place(float* dst, const float* src, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] += src[i];
}

void silu_mul(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void rope_rotate(float* x, int n_heads, int head_dim, const float* cos, const float* sin,
                 bool neox) {
  const int half = head_dim / 2;
  for (int h = 0; h < n_heads; ++h) {
    float* v = x + static_cast<int64_t>(h) * head_dim;
    for (int i = 0; i < half; ++i) {
      const int a = neox ? i : 2 * i;
      const int b = neox ? i + half : 2 * i + 1;
      const float x0 = v[a], x1 = v[b];
      v[a] = x0 * cos[i] - x1 * sin[i];
      v[b] = x0 * sin[i] + x1 * cos[i];
    }
  }
}

}  // namespace rapide
