// Per-input-channel statistics of one linear layer's input over the calibration tokens:
// what AWQ (mean |x|), SmoothQuant (max |x|), the importance matrix (mean x^2) and GPTQ
// (H = X^T X / tokens) need. Matrices that read the same input share one InputStats.
#pragma once

#include <cstdint>
#include <vector>

namespace rapide::quant {

struct InputStats {
  int64_t cols = 0;
  int64_t tokens = 0;
  int64_t calls = 0;            // forward passes that contributed (imatrix ncall)
  std::vector<double> sum_abs;  // per channel
  std::vector<double> sum_sq;   // per channel
  std::vector<float> max_abs;   // per channel
  std::vector<float> hessian;   // cols x cols sum of x x^T, empty when not collected

  // Adds n rows of cols floats.
  void add(const float* x, int64_t n, bool with_hessian);

  std::vector<float> mean_abs() const;
  std::vector<float> mean_sq() const;
  // H / tokens (row-major, symmetric); the diagonal of mean_sq() when no Hessian was
  // collected (the channels taken as uncorrelated).
  std::vector<float> mean_hessian() const;

  // The statistics of x / s (an input scaled per channel, as folding a scale into the
  // preceding norm does).
  void divide_channels(const std::vector<float>& s);
};

}  // namespace rapide::quant
