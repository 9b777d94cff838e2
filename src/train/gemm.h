// The three row-major float products a linear layer y = x W^T needs in training, through
// CBLAS: forward (y = x W^T), input gradient (dx = dy W) and weight gradient (dW += dy^T x).
// W is stored as GGUF stores it: `out` rows of `in` floats.
#pragma once

#include <cstdint>

namespace rapide::train {

// y[n][out] = x[n][in] * W[out][in]^T (+ y when accumulate).
void linear_forward(const float* x, const float* w, int64_t n, int64_t in, int64_t out, float* y,
                    bool accumulate = false);
// dx[n][in] (+)= dy[n][out] * W[out][in].
void linear_backward_input(const float* dy, const float* w, int64_t n, int64_t in, int64_t out,
                           float* dx, bool accumulate);
// dW[out][in] += dy[n][out]^T * x[n][in].
void linear_backward_weight(const float* dy, const float* x, int64_t n, int64_t in, int64_t out,
                            float* dw);

}  // namespace rapide::train
