// quantize_row / dequantize_row against a verbatim transcription of llama.cpp's reference
// quantizers (ggml-quants.c), byte for byte.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "base/error.h"
#include "base/fp16.h"
#include "kernels/matmul.h"

namespace rapide {
namespace {

// llama.cpp quantize_row_q8_0_ref.
void llama_q8_0(const float* x, BlockQ8_0* y, int64_t k) {
  const int nb = static_cast<int>(k / 32);
  for (int i = 0; i < nb; i++) {
    float amax = 0.0f;
    for (int j = 0; j < 32; j++) {
      const float v = x[i * 32 + j];
      amax = amax > fabsf(v) ? amax : fabsf(v);
    }
    const float d = amax / ((1 << 7) - 1);
    const float id = d ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    for (int j = 0; j < 32; ++j) y[i].qs[j] = static_cast<int8_t>(roundf(x[i * 32 + j] * id));
  }
}

// llama.cpp quantize_row_q4_0_ref.
void llama_q4_0(const float* x, BlockQ4_0* y, int64_t k) {
  const int qk = 32;
  const int nb = static_cast<int>(k / qk);
  for (int i = 0; i < nb; i++) {
    float amax = 0.0f;
    float max = 0.0f;
    for (int j = 0; j < qk; j++) {
      const float v = x[i * qk + j];
      if (amax < fabsf(v)) {
        amax = fabsf(v);
        max = v;
      }
    }
    const float d = max / -8;
    const float id = d ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    for (int j = 0; j < qk / 2; ++j) {
      const float x0 = x[i * qk + 0 + j] * id;
      const float x1 = x[i * qk + qk / 2 + j] * id;
      const int8_t c0 = static_cast<int8_t>(x0 + 8.5f);
      const int8_t c1 = static_cast<int8_t>(x1 + 8.5f);
      const uint8_t xi0 = static_cast<uint8_t>(c0 < 15 ? c0 : 15);
      const uint8_t xi1 = static_cast<uint8_t>(c1 < 15 ? c1 : 15);
      y[i].qs[j] = static_cast<uint8_t>(xi0 | (xi1 << 4));
    }
  }
}

std::vector<float> random_row(int64_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

TEST(QuantizeRow, Q8_0MatchesLlamaCppBytes) {
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    const int64_t n = 32 * 37;
    std::vector<float> x = random_row(n, seed, seed * 0.37f);
    x[5] = 0.0f;
    for (int j = 64; j < 96; ++j) x[j] = 0.0f;  // an all-zero block: d = 0
    std::vector<BlockQ8_0> ours(n / 32), ref(n / 32);
    quantize_row(TensorType::kQ8_0, x.data(), ours.data(), n);
    llama_q8_0(x.data(), ref.data(), n);
    ASSERT_EQ(0, std::memcmp(ours.data(), ref.data(), ours.size() * sizeof(BlockQ8_0)));
  }
}

// A block whose largest magnitude is 127 has d = 1 and id = 1, so its codes are the
// values rounded: halves go away from zero (roundf), just below a half goes down.
TEST(QuantizeRow, Q8_0RoundsHalvesAwayFromZeroLikeTheReference) {
  const float values[] = {127.0f,  2.5f,       -2.5f,       0.5f,         -0.5f,       1.5f,
                          -126.5f, 126.5f,     3.49999976f, -3.49999976f, 0.49999997f, -0.49999997f,
                          -127.0f, 7.5000005f, -7.5000005f, 0.0f,         -0.0f,       1e-30f};
  std::vector<float> x(32, 0.25f);
  std::copy(std::begin(values), std::end(values), x.begin());
  BlockQ8_0 ours, ref;
  quantize_row(TensorType::kQ8_0, x.data(), &ours, 32);
  llama_q8_0(x.data(), &ref, 32);
  ASSERT_EQ(0, std::memcmp(&ours, &ref, sizeof(BlockQ8_0)));
  EXPECT_EQ(ours.qs[1], 3);
  EXPECT_EQ(ours.qs[2], -3);
  EXPECT_EQ(ours.qs[3], 1);
  EXPECT_EQ(ours.qs[4], -1);
  EXPECT_EQ(ours.qs[6], -127);
  EXPECT_EQ(ours.qs[8], 3);
  EXPECT_EQ(ours.qs[10], 0);
}

TEST(QuantizeRow, Q4_0MatchesLlamaCppBytes) {
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    const int64_t n = 32 * 37;
    std::vector<float> x = random_row(n, seed, seed * 0.37f);
    for (int j = 64; j < 96; ++j) x[j] = 0.0f;
    x[100] = 50.0f;   // positive extreme: d < 0
    x[140] = -50.0f;  // negative extreme: d > 0
    std::vector<BlockQ4_0> ours(n / 32), ref(n / 32);
    quantize_row(TensorType::kQ4_0, x.data(), ours.data(), n);
    llama_q4_0(x.data(), ref.data(), n);
    ASSERT_EQ(0, std::memcmp(ours.data(), ref.data(), ours.size() * sizeof(BlockQ4_0)));
  }
}

TEST(QuantizeRow, RoundTripsWithinQuantizationError) {
  const int64_t n = 32 * 8;
  const std::vector<float> x = random_row(n, 7);
  std::vector<uint8_t> buf(static_cast<size_t>(n) * 4);
  std::vector<float> back(static_cast<size_t>(n));
  struct Case {
    TensorType type;
    float rel_tol;  // of the block's max magnitude (or of the value for float types)
  };
  for (Case c : {Case{TensorType::kF32, 0.0f}, Case{TensorType::kF16, 1.0f / 1024},
                 Case{TensorType::kBF16, 1.0f / 128}, Case{TensorType::kQ8_0, 0.5f / 127 + 1e-3f},
                 Case{TensorType::kQ4_0, 1.0f / 8 + 1e-3f}}) {
    quantize_row(c.type, x.data(), buf.data(), n);
    dequantize_row(c.type, buf.data(), back.data(), n);
    for (int64_t b = 0; b < n / 32; ++b) {
      float amax = 0;
      for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(x[b * 32 + j]));
      for (int j = 0; j < 32; ++j) {
        const int64_t i = b * 32 + j;
        const float scale = tensor_type_block_size(c.type) == 1 ? std::fabs(x[i]) : amax;
        EXPECT_LE(std::fabs(back[i] - x[i]), c.rel_tol * scale) << tensor_type_name(c.type) << i;
      }
    }
  }
}

TEST(QuantizeRow, F16AndBf16AreExactConversions) {
  const std::vector<float> x = random_row(64, 3);
  std::vector<uint16_t> h(64);
  quantize_row(TensorType::kF16, x.data(), h.data(), 64);
  for (int i = 0; i < 64; ++i) EXPECT_EQ(h[i], fp32_to_fp16(x[i]));
  quantize_row(TensorType::kBF16, x.data(), h.data(), 64);
  for (int i = 0; i < 64; ++i) EXPECT_EQ(h[i], fp32_to_bf16(x[i]));
}

TEST(QuantizeRow, DequantizesKnownBlocks) {
  BlockQ4_0 q4{};
  q4.d = fp32_to_fp16(0.5f);
  for (int j = 0; j < 16; ++j) q4.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  float out[32];
  dequantize_row(TensorType::kQ4_0, &q4, out, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(out[j], 0.5f * (j - 8));
    EXPECT_EQ(out[j + 16], 0.5f * (7 - j));
  }
  BlockQ8_0 q8{};
  q8.d = fp32_to_fp16(0.25f);
  for (int j = 0; j < 32; ++j) q8.qs[j] = static_cast<int8_t>(j * 8 - 127);
  dequantize_row(TensorType::kQ8_0, &q8, out, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(out[j], 0.25f * (j * 8 - 127));
}

TEST(QuantizeRow, RejectsPartialBlocks) {
  float x[40] = {};
  BlockQ8_0 out[2];
  EXPECT_THROW(quantize_row(TensorType::kQ8_0, x, out, 40), Error);
  EXPECT_THROW(dequantize_row(TensorType::kQ4_0, out, x, 33), Error);
}

}  // namespace
}  // namespace rapide
