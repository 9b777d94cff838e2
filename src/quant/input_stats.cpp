#include "quant/input_stats.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>

namespace rapide::quant {

void InputStats::add(const float* x, int64_t n, bool with_hessian) {
  if (sum_abs.empty()) {
    sum_abs.assign(static_cast<size_t>(cols), 0.0);
    sum_sq.assign(static_cast<size_t>(cols), 0.0);
    max_abs.assign(static_cast<size_t>(cols), 0.0f);
  }
  for (int64_t t = 0; t < n; ++t) {
    const float* row = x + t * cols;
    for (int64_t c = 0; c < cols; ++c) {
      const float a = std::fabs(row[c]);
      sum_abs[c] += a;
      sum_sq[c] += static_cast<double>(a) * a;
      max_abs[c] = std::max(max_abs[c], a);
    }
  }
  if (with_hessian) {
    if (hessian.empty()) hessian.assign(static_cast<size_t>(cols * cols), 0.0f);
    // H += X^T X: the one product here that grows with the calibration set.
    cblas_ssyrk(CblasRowMajor, CblasUpper, CblasTrans, static_cast<int>(cols), static_cast<int>(n),
                1.0f, x, static_cast<int>(cols), 1.0f, hessian.data(), static_cast<int>(cols));
  }
  tokens += n;
  ++calls;
}

std::vector<float> InputStats::mean_abs() const {
  std::vector<float> out(static_cast<size_t>(cols), 0.0f);
  for (int64_t c = 0; c < cols && tokens > 0; ++c) out[c] = static_cast<float>(sum_abs[c] / tokens);
  return out;
}

std::vector<float> InputStats::mean_sq() const {
  std::vector<float> out(static_cast<size_t>(cols), 0.0f);
  for (int64_t c = 0; c < cols && tokens > 0; ++c) out[c] = static_cast<float>(sum_sq[c] / tokens);
  return out;
}

std::vector<float> InputStats::mean_hessian() const {
  std::vector<float> h(static_cast<size_t>(cols * cols), 0.0f);
  if (hessian.empty()) {
    const std::vector<float> d = mean_sq();
    for (int64_t c = 0; c < cols; ++c) h[c * cols + c] = d[c];
    return h;
  }
  const float inv = tokens > 0 ? 1.0f / static_cast<float>(tokens) : 0.0f;
  for (int64_t i = 0; i < cols; ++i) {  // syrk filled the upper triangle
    for (int64_t j = i; j < cols; ++j) {
      h[i * cols + j] = h[j * cols + i] = hessian[i * cols + j] * inv;
    }
  }
  return h;
}

void InputStats::divide_channels(const std::vector<float>& s) {
  for (int64_t c = 0; c < cols; ++c) {
    sum_abs[c] /= s[c];
    sum_sq[c] /= static_cast<double>(s[c]) * s[c];
    max_abs[c] /= s[c];
  }
  if (!hessian.empty()) {
    for (int64_t i = 0; i < cols; ++i) {
      for (int64_t j = 0; j < cols; ++j) hessian[i * cols + j] /= s[i] * s[j];
    }
  }
}

}  // namespace rapide::quant
