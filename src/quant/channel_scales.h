// Per-input-channel scales that are folded out of a linear layer exactly in float and only
// change what quantization loses: y = W x = (W diag(s)) (x / s). The matrices are stored as
// W diag(s) (scale_columns); x / s comes from the operation before them, whose weights
// absorb 1 / s (an RMSNorm weight, or the rows of a matrix whose outputs feed x linearly).
//
//   AWQ (Lin et al., 2023): s = mean|x|^alpha, alpha grid-searched (kAwqGrid points in
//   [0, 1)) for the least output error of quantize(W diag(s)) diag(1/s) on the calibration
//   inputs (matrix_quant.h output_error, with their H); the matrices that read the same
//   input are searched together and share s. alpha = 0 is plain round-to-nearest, so the
//   search never does worse than it on the calibration set.
//   SmoothQuant (Xiao et al., 2022): s = max|x|^alpha / max|W|^(1 - alpha), moving the
//   activations' outlier channels into the weights (the max over every matrix of the group).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "formats/tensor_type.h"

namespace rapide::quant {

// One weight matrix in f32 while it is being calibrated, with the type it is written as.
struct FloatMatrix {
  std::string name;
  TensorType type = TensorType::kF32;
  int64_t rows = 0, cols = 0;
  std::vector<float> w;  // rows x cols
};

constexpr int kAwqGrid = 20;

struct AwqResult {
  std::vector<float> scales;  // per input channel
  float alpha = 0.0f;
  double error = 0.0;      // output error with the chosen scales
  double rtn_error = 0.0;  // ... and with none (alpha = 0)
};

// mean_abs: the input's mean |x| per channel (channels that must share a scale already
// averaged by the caller); h: its mean second moment (cols x cols); channel_weights: an
// importance vector for the rounding (nullptr: plain round-to-nearest).
AwqResult search_awq_scales(std::span<const FloatMatrix* const> group,
                            const std::vector<float>& mean_abs, const std::vector<float>& h,
                            const float* channel_weights);

std::vector<float> smooth_scales(std::span<const FloatMatrix* const> group,
                                 const std::vector<float>& max_abs, float alpha);

// W[:, j] *= s[j].
void scale_columns(FloatMatrix& m, const std::vector<float>& s);
// v[j] /= s[j] over n values (a norm weight, or an output row of a matrix).
void divide_by(float* v, const std::vector<float>& s, int64_t n);

}  // namespace rapide::quant
