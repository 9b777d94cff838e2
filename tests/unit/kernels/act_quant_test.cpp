// --act-quant: quantized weights against int8 activation blocks (kInt8, llama.cpp's
// numerics) or against f32 activations (kOff, dequantize a row then FMA). Both must stay
// close to the exact product of the dequantized weights with the f32 activations (computed
// here in double), kOff much closer than kInt8, and every ISA's kOff kernel must agree
// with its scalar twin. On a real model, both switches keep the logits of the Q8_0 file
// close to the F16 original's.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "base/cpu_features.h"
#include "kernels/matmul.h"
#include "model/contiguous_kv_store.h"
#include "model/model.h"
#include "test_paths.h"
#include "weight_matrix_data.h"

namespace rapide {
namespace {

constexpr int64_t kRows = 40, kCols = 256, kTokens = 5;  // 40: a partly filled last panel

Matrix quantized(TensorType type, uint32_t seed) {
  const std::vector<float> w = random_activations(kRows * kCols, seed);
  Matrix m;
  m.bytes.resize(static_cast<size_t>(kRows * tensor_row_bytes(type, kCols)));
  for (int64_t r = 0; r < kRows; ++r) {
    quantize_row(type, w.data() + r * kCols, m.bytes.data() + r * tensor_row_bytes(type, kCols),
                 kCols);
  }
  point_view(m, type, kRows, kCols);
  return m;
}

// Relative L2 distance of y from the exact product of the dequantized weights.
double relative_error(const Matrix& m, const std::vector<float>& x, const std::vector<float>& y) {
  std::vector<float> row(kCols);
  double err = 0.0, norm = 0.0;
  for (int64_t r = 0; r < kRows; ++r) {
    dequantize_row(m.view.type, m.bytes.data() + r * tensor_row_bytes(m.view.type, kCols),
                   row.data(), kCols);
    for (int64_t t = 0; t < kTokens; ++t) {
      double exact = 0.0;
      for (int64_t c = 0; c < kCols; ++c) exact += static_cast<double>(row[c]) * x[t * kCols + c];
      err += std::pow(y[t * kRows + r] - exact, 2);
      norm += exact * exact;
    }
  }
  return std::sqrt(err / norm);
}

std::vector<IsaLevel> levels() {
  std::vector<IsaLevel> out = {IsaLevel::kScalar};
  if (cpu_features().best_level() >= IsaLevel::kAvx2) out.push_back(IsaLevel::kAvx2);
  if (cpu_features().best_level() >= IsaLevel::kAvx512) out.push_back(IsaLevel::kAvx512);
  return out;
}

TEST(ActQuant, OffIsExactToFloatRoundingAndInt8IsClose) {
  ThreadPool pool(2);
  const std::vector<float> x = random_activations(kTokens * kCols, 11);
  for (TensorType type : {TensorType::kQ8_0, TensorType::kQ4_0, TensorType::kQ4_1,
                          TensorType::kIQ4_NL, TensorType::kQ4_K, TensorType::kQ6_K}) {
    SCOPED_TRACE(tensor_type_name(type));
    const Matrix m = quantized(type, 12);
    const WeightMatrix off = WeightMatrix::prepare(m.view, ActQuant::kOff);
    const WeightMatrix int8 = WeightMatrix::prepare(m.view, ActQuant::kInt8);
    std::vector<float> y_ref(kTokens * kRows), y(kTokens * kRows);
    off.multiply_reference(x.data(), kTokens, y_ref.data());
    const double off_err = relative_error(m, x, y_ref);
    EXPECT_LT(off_err, 1e-6);
    for (IsaLevel level : levels()) {
      SCOPED_TRACE(isa_level_name(level));
      off.multiply_with(level, x.data(), kTokens, y.data(), pool);
      for (size_t i = 0; i < y.size(); ++i) {  // only the summation order differs
        EXPECT_NEAR(y[i], y_ref[i], 1e-4f * (1.0f + std::fabs(y_ref[i]))) << i;
      }
    }
    int8.multiply(x.data(), kTokens, y.data(), pool);
    const double int8_err = relative_error(m, x, y);
    EXPECT_LT(int8_err, 2e-2);
    EXPECT_LT(off_err * 100, int8_err);  // what quantizing the activations costs
    // The embedding lookup reads the same rows either way.
    std::vector<float> a(kCols), b(kCols);
    off.dequantize_row(kRows - 1, a.data());
    int8.dequantize_row(kRows - 1, b.data());
    EXPECT_EQ(a, b);
  }
}

// Q8_0 TinyStories-656K against its F16 original, 32 tokens of a story: both activation
// modes stay within a small fraction of the logits' range.
TEST(ActQuant, BothModesTrackTheF16Model) {
  const char* kF16 = "models/tinystories-656k/TinyStories-656K-F16.gguf";
  const char* kQ8 = "models/tinystories-656k/TinyStories-656K-Q8_0.gguf";
  RAPIDE_REQUIRE_SHARED(kF16);
  RAPIDE_REQUIRE_SHARED(kQ8);
  ThreadPool pool(1);
  auto run = [&](const char* path, ActQuant act) {
    Model model(std::make_shared<const ModelFile>(load_model(testing::shared_path(path))), act);
    ContiguousKvStore kv(model.config(), 1, 64);
    Batch batch;
    for (int p = 0; p < 32; ++p) batch.add((p * 37 + 1) % model.config().vocab_size, 0, p, true);
    const std::span<const float> out = model.forward(batch, kv, pool);
    return std::vector<float>(out.begin(), out.end());
  };
  const std::vector<float> ref = run(kF16, ActQuant::kInt8);  // F16 weights: act ignored
  float range = 0.0f;
  for (float v : ref) range = std::max(range, std::fabs(v));
  for (ActQuant act : {ActQuant::kInt8, ActQuant::kOff}) {
    const std::vector<float> got = run(kQ8, act);
    double err = 0.0;
    for (size_t i = 0; i < got.size(); ++i) err = std::max<double>(err, std::fabs(got[i] - ref[i]));
    EXPECT_LT(err, 0.05 * range) << (act == ActQuant::kOff ? "off" : "int8");
  }
}

}  // namespace
}  // namespace rapide
