// GPTQ and AWQ on a single linear layer: both must lower the layer's output error against
// round-to-nearest on held-out inputs drawn like the calibration ones (correlated channels,
// a few outlier channels, as real activations have), and GPTQ keeps the type's exact layout.
#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "kernels/matmul.h"
#include "quant/channel_scales.h"
#include "quant/gptq.h"
#include "quant/input_stats.h"
#include "quant/matrix_quant.h"

namespace rapide::quant {
namespace {

constexpr int64_t kRows = 64, kCols = 128, kTokens = 512;
// The 256-weight types need whole super-blocks: two lazy blocks' worth.
constexpr int64_t kKCols = 512;

// Activations: 16 latent factors mixed into `cols` channels, plus noise; every 16th channel
// is 8x larger.
struct Inputs {
  int64_t cols;
  std::vector<float> mix;
  explicit Inputs(uint32_t seed, int64_t cols_ = kCols) : cols(cols_), mix(16 * cols_) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> n(0.0f, 1.0f);
    for (float& v : mix) v = n(rng);
  }
  std::vector<float> draw(uint32_t seed) const {
    std::mt19937 rng(seed);
    std::normal_distribution<float> n(0.0f, 1.0f);
    std::vector<float> x(kTokens * cols, 0.0f);
    for (int64_t t = 0; t < kTokens; ++t) {
      float z[16];
      for (float& v : z) v = n(rng);
      for (int64_t c = 0; c < cols; ++c) {
        float v = 0.3f * n(rng);
        for (int k = 0; k < 16; ++k) v += z[k] * mix[k * cols + c] * 0.25f;
        x[t * cols + c] = c % 16 == 0 ? 8.0f * v : v;
      }
    }
    return x;
  }
};

std::vector<float> random_weights(uint32_t seed, int64_t cols = kCols) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.0f, 0.05f);
  std::vector<float> w(kRows * cols);
  for (float& v : w) v = n(rng);
  return w;
}

InputStats stats_of(const std::vector<float>& x, int64_t cols = kCols) {
  InputStats s;
  s.cols = cols;
  s.add(x.data(), kTokens, /*with_hessian=*/true);
  return s;
}

TEST(LayerError, GptqBeatsRoundToNearestOnHeldOutInputs) {
  const Inputs inputs(1);
  const std::vector<float> calib = inputs.draw(2), held_out = inputs.draw(3);
  const std::vector<float> h = stats_of(calib).mean_hessian();
  const std::vector<float> h_test = stats_of(held_out).mean_hessian();
  const std::vector<float> w = random_weights(4);
  for (TensorType type : {TensorType::kQ4_0, TensorType::kQ4_1, TensorType::kIQ4_NL,
                          TensorType::kQ5_0, TensorType::kQ8_0}) {
    SCOPED_TRACE(tensor_type_name(type));
    const std::vector<uint8_t> gptq = gptq_quantize(type, w.data(), kRows, kCols, h);
    ASSERT_EQ(gptq.size(), static_cast<size_t>(kRows * tensor_row_bytes(type, kCols)));
    const std::vector<uint8_t> rtn = quantize_matrix(type, w.data(), kRows, kCols);
    const double e_gptq = output_error(
        w.data(), dequantize_matrix(type, gptq.data(), kRows, kCols).data(), kRows, kCols, h_test);
    const double e_rtn = output_error(
        w.data(), dequantize_matrix(type, rtn.data(), kRows, kCols).data(), kRows, kCols, h_test);
    EXPECT_LT(e_gptq, 0.8 * e_rtn) << "gptq " << e_gptq << " rtn " << e_rtn;
  }
}

// The k-quants and IQ4_XS: scales planned per super-block as the type's own quantizer plans
// them, then GPTQ's compensated rounding on them. The 2-bit and 3-bit types, whose rounding
// errors are largest, gain the most; every type must gain.
TEST(LayerError, GptqBeatsRoundToNearestOnSuperBlockTypes) {
  const Inputs inputs(11, kKCols);
  const std::vector<float> calib = inputs.draw(12), held_out = inputs.draw(13);
  const std::vector<float> h = stats_of(calib, kKCols).mean_hessian();
  const std::vector<float> h_test = stats_of(held_out, kKCols).mean_hessian();
  const std::vector<float> w = random_weights(14, kKCols);
  for (TensorType type : {TensorType::kQ2_K, TensorType::kQ3_K, TensorType::kQ4_K,
                          TensorType::kQ5_K, TensorType::kQ6_K, TensorType::kIQ4_XS}) {
    SCOPED_TRACE(tensor_type_name(type));
    ASSERT_TRUE(gptq_supports(type));
    const std::vector<uint8_t> gptq = gptq_quantize(type, w.data(), kRows, kKCols, h);
    ASSERT_EQ(gptq.size(), static_cast<size_t>(kRows * tensor_row_bytes(type, kKCols)));
    const std::vector<uint8_t> rtn = quantize_matrix(type, w.data(), kRows, kKCols);
    const double e_gptq =
        output_error(w.data(), dequantize_matrix(type, gptq.data(), kRows, kKCols).data(), kRows,
                     kKCols, h_test);
    const double e_rtn = output_error(
        w.data(), dequantize_matrix(type, rtn.data(), kRows, kKCols).data(), kRows, kKCols, h_test);
    std::printf("%-7s held-out output error: rtn %.4g, gptq %.4g (%.0f %% lower)\n",
                std::string(tensor_type_name(type)).c_str(), e_rtn, e_gptq,
                100.0 * (1.0 - e_gptq / e_rtn));
    EXPECT_LT(e_gptq, 0.8 * e_rtn) << "gptq " << e_gptq << " rtn " << e_rtn;
  }
}

TEST(LayerError, GptqRejectsUnsupportedTypesAndPartialBlocks) {
  const std::vector<float> w = random_weights(5);
  std::vector<float> h(kCols * kCols, 0.0f);
  for (int64_t i = 0; i < kCols; ++i) h[i * kCols + i] = 1.0f;
  EXPECT_FALSE(gptq_supports(TensorType::kF16));
  EXPECT_THROW(gptq_quantize(TensorType::kF16, w.data(), kRows, kCols, h), Error);
  // 128 columns are not a whole 256-weight super-block.
  EXPECT_THROW(gptq_quantize(TensorType::kQ4_K, w.data(), kRows, kCols, h), Error);
}

TEST(LayerError, AwqScalesLowerHeldOutError) {
  const Inputs inputs(6);
  const std::vector<float> calib = inputs.draw(7), held_out = inputs.draw(8);
  const InputStats s = stats_of(calib);
  const std::vector<float> h_test = stats_of(held_out).mean_hessian();
  FloatMatrix m;
  m.name = "w";
  m.type = TensorType::kQ4_0;
  m.rows = kRows;
  m.cols = kCols;
  m.w = random_weights(9);
  const FloatMatrix* group[] = {&m};
  const AwqResult r = search_awq_scales(group, s.mean_abs(), s.mean_hessian(), nullptr);
  EXPECT_LE(r.error, r.rtn_error);
  EXPECT_GT(r.alpha, 0.0f);  // the outlier channels make scaling worth it
  // Held out: quantize(W diag(s)) diag(1/s) against W.
  FloatMatrix scaled = m;
  scale_columns(scaled, r.scales);
  std::vector<float> back = dequantize_matrix(
      m.type, quantize_matrix(m.type, scaled.w.data(), kRows, kCols).data(), kRows, kCols);
  for (int64_t row = 0; row < kRows; ++row) divide_by(back.data() + row * kCols, r.scales, kCols);
  const std::vector<float> rtn = dequantize_matrix(
      m.type, quantize_matrix(m.type, m.w.data(), kRows, kCols).data(), kRows, kCols);
  EXPECT_LT(output_error(m.w.data(), back.data(), kRows, kCols, h_test),
            output_error(m.w.data(), rtn.data(), kRows, kCols, h_test));
}

}  // namespace
}  // namespace rapide::quant
