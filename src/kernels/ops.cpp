#include "kernels/ops.h"

#include <cmath>

#include "base/cpu_features.h"
#include "base/fp16.h"
#include "kernels/ops_internal.h"

namespace rapide {

namespace ops::scalar {

void rms_norm(const float* x, const float* weight, int64_t n, float eps, float* out) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  const float scale = 1.0f / std::sqrt(mean + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = (x[i] * scale) * weight[i];
}

void add(const float* a, const float* b, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

void silu_mul(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void softmax(float* x, int64_t n) {
  if (n <= 0) return;
  float max = x[0];
  for (int64_t i = 1; i < n; ++i) max = std::fmax(max, x[i]);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += x[i];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

void to_fp16(const float* x, int64_t n, uint16_t* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = fp32_to_fp16(x[i]);
}

}  // namespace ops::scalar

namespace {
bool use_avx512() {
  static const bool yes = active_isa_level() >= IsaLevel::kAvx512;
  return yes;
}
}  // namespace

void rms_norm(const float* x, const float* weight, int64_t n, float eps, float* out) {
  if (use_avx512()) return ops::avx512::rms_norm(x, weight, n, eps, out);
  ops::scalar::rms_norm(x, weight, n, eps, out);
}

void add_in_place(float* dst, const float* src, int64_t n) {
  add(dst, src, n, dst);
}

void add(const float* a, const float* b, int64_t n, float* out) {
  if (use_avx512()) return ops::avx512::add(a, b, n, out);
  ops::scalar::add(a, b, n, out);
}

void silu_mul(const float* gate, const float* up, int64_t n, float* out) {
  if (use_avx512()) return ops::avx512::silu_mul(gate, up, n, out);
  ops::scalar::silu_mul(gate, up, n, out);
}

void to_fp16(const float* x, int64_t n, uint16_t* out) {
  if (use_avx512()) return ops::avx512::to_fp16(x, n, out);
  ops::scalar::to_fp16(x, n, out);
}

void softmax(float* x, int64_t n) {
  if (use_avx512()) return ops::avx512::softmax(x, n);
  ops::scalar::softmax(x, n);
}

// A few dozen values per head: the scalar loop is as fast as any dispatch would be.
void layer_norm(const float* x, const float* weight, int64_t n, float eps, float* out) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]);
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  double var = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const float d = x[i] - mean;
    var += static_cast<double>(d * d);
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(var / static_cast<double>(n)) + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = ((x[i] - mean) * scale) * weight[i];
}

void rope_rotate(float* x, int n_heads, int head_dim, int rot_dims, const float* cos,
                 const float* sin, bool neox) {
  const int half = rot_dims / 2;
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
