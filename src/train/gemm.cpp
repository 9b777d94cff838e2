#include "train/gemm.h"

#include <cblas.h>

namespace rapide::train {

void linear_forward(const float* x, const float* w, int64_t n, int64_t in, int64_t out, float* y,
                    bool accumulate) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(n), static_cast<int>(out),
              static_cast<int>(in), 1.0f, x, static_cast<int>(in), w, static_cast<int>(in),
              accumulate ? 1.0f : 0.0f, y, static_cast<int>(out));
}

void linear_backward_input(const float* dy, const float* w, int64_t n, int64_t in, int64_t out,
                           float* dx, bool accumulate) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(n), static_cast<int>(in),
              static_cast<int>(out), 1.0f, dy, static_cast<int>(out), w, static_cast<int>(in),
              accumulate ? 1.0f : 0.0f, dx, static_cast<int>(in));
}

void linear_backward_weight(const float* dy, const float* x, int64_t n, int64_t in, int64_t out,
                            float* dw) {
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, static_cast<int>(out), static_cast<int>(in),
              static_cast<int>(n), 1.0f, dy, static_cast<int>(out), x, static_cast<int>(in), 1.0f,
              dw, static_cast<int>(in));
}

}  // namespace rapide::train
