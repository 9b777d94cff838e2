#include "quant/channel_scales.h"

#include <algorithm>
#include <cfloat>
#include <cmath>

#include "base/error.h"
#include "quant/matrix_quant.h"

namespace rapide::quant {
namespace {

// Scales far from 1 only grow the quantization step of the other channels.
constexpr float kMinScale = 1e-4f;

// quantize(W diag(s)) diag(1/s), compared with W over the inputs' second moment h.
double scaled_error(const FloatMatrix& m, const std::vector<float>& s, const std::vector<float>& h,
                    const float* channel_weights) {
  FloatMatrix scaled = m;
  scale_columns(scaled, s);
  std::vector<float> weights;
  if (channel_weights != nullptr) {  // the input is x / s: its importance is w / s^2
    weights.assign(channel_weights, channel_weights + m.cols);
    for (int64_t c = 0; c < m.cols; ++c) weights[c] /= s[c] * s[c];
  }
  const std::vector<uint8_t> q = quantize_matrix(m.type, scaled.w.data(), m.rows, m.cols,
                                                 weights.empty() ? nullptr : weights.data());
  std::vector<float> back = dequantize_matrix(m.type, q.data(), m.rows, m.cols);
  for (int64_t r = 0; r < m.rows; ++r) divide_by(back.data() + r * m.cols, s, m.cols);
  return output_error(m.w.data(), back.data(), m.rows, m.cols, h);
}

}  // namespace

AwqResult search_awq_scales(std::span<const FloatMatrix* const> group,
                            const std::vector<float>& mean_abs, const std::vector<float>& h,
                            const float* channel_weights) {
  const int64_t cols = static_cast<int64_t>(mean_abs.size());
  AwqResult best;
  best.error = DBL_MAX;
  for (int step = 0; step < kAwqGrid; ++step) {
    const float alpha = static_cast<float>(step) / kAwqGrid;
    std::vector<float> s(static_cast<size_t>(cols));
    float lo = FLT_MAX, hi = 0.0f;
    for (int64_t c = 0; c < cols; ++c) {
      s[c] = std::max(std::pow(std::max(mean_abs[c], 1e-8f), alpha), kMinScale);
      lo = std::min(lo, s[c]);
      hi = std::max(hi, s[c]);
    }
    // Centred on 1 in log scale (as AWQ's reference): only the ratios matter, and this keeps
    // the folded norm weights and the scaled matrices in a comfortable f16 range.
    const float centre = std::sqrt(lo * hi);
    for (float& v : s) v /= centre;
    double error = 0.0;
    for (const FloatMatrix* m : group) {
      if (m->cols != cols)
        fail(ErrorCode::kInternal, "awq: {} has {} columns, not {}", m->name, m->cols, cols);
      error += scaled_error(*m, s, h, channel_weights);
    }
    if (step == 0) best.rtn_error = error;
    if (error < best.error) {
      best.error = error;
      best.alpha = alpha;
      best.scales = std::move(s);
    }
  }
  return best;
}

std::vector<float> smooth_scales(std::span<const FloatMatrix* const> group,
                                 const std::vector<float>& max_abs, float alpha) {
  const int64_t cols = static_cast<int64_t>(max_abs.size());
  std::vector<float> wmax(static_cast<size_t>(cols), 0.0f);
  for (const FloatMatrix* m : group) {
    for (int64_t r = 0; r < m->rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) wmax[c] = std::max(wmax[c], std::fabs(m->w[r * cols + c]));
    }
  }
  std::vector<float> s(static_cast<size_t>(cols), 1.0f);
  for (int64_t c = 0; c < cols; ++c) {
    if (max_abs[c] <= 0.0f || wmax[c] <= 0.0f) continue;  // a dead channel keeps scale 1
    s[c] = std::max(std::pow(max_abs[c], alpha) / std::pow(wmax[c], 1.0f - alpha), kMinScale);
  }
  return s;
}

void scale_columns(FloatMatrix& m, const std::vector<float>& s) {
  for (int64_t r = 0; r < m.rows; ++r) {
    for (int64_t c = 0; c < m.cols; ++c) m.w[r * m.cols + c] *= s[c];
  }
}

void divide_by(float* v, const std::vector<float>& s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) v[i] /= s[i];
}

}  // namespace rapide::quant
