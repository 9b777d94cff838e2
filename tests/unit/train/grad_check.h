// Central finite differences for the training tests: d f / d x[i] = (f(x + h) - f(x - h)) / 2h,
// compared with an analytic gradient within an absolute plus relative tolerance (the sums
// run in F32, so h trades truncation error against rounding).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

namespace rapide::train::testing {

inline void expect_gradient(const std::string& what, float* x, int64_t n,
                            const std::function<double()>& f, const float* analytic,
                            float h = 1e-2f, double tolerance = 2e-2, int64_t stride = 1) {
  int checked = 0;
  for (int64_t i = 0; i < n; i += stride) {
    const float saved = x[i];
    x[i] = saved + h;
    const double up = f();
    x[i] = saved - h;
    const double down = f();
    x[i] = saved;
    const double numeric = (up - down) / (2.0 * h);
    EXPECT_NEAR(analytic[i], numeric, tolerance * (1e-1 + std::abs(numeric)))
        << what << " element " << i;
    ++checked;
  }
  EXPECT_GT(checked, 0) << what;
}

}  // namespace rapide::train::testing
