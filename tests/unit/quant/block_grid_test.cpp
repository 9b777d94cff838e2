// The block grids GPTQ and the weighted search round through: what a grid says a code is
// worth must be what the independent dequantize_row reads from the packed bytes, and the
// grid of scale factor 1 must be as good as round-to-nearest.
#include "quant/block_grid.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "kernels/matmul.h"

namespace rapide::quant {
namespace {

constexpr TensorType kTypes[] = {TensorType::kQ4_0, TensorType::kQ4_1, TensorType::kQ5_0,
                                 TensorType::kQ5_1, TensorType::kQ8_0, TensorType::kIQ4_NL};

std::vector<float> random_block(uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 0.02f);
  std::vector<float> x(32);
  for (float& v : x) v = dist(rng);
  return x;
}

TEST(BlockGrid, PackedCodesDequantizeToTheGridValues) {
  for (TensorType type : kTypes) {
    SCOPED_TRACE(tensor_type_name(type));
    ASSERT_TRUE(has_block_grid(type));
    for (uint32_t seed = 0; seed < 20; ++seed) {
      const std::vector<float> x = random_block(seed);
      const BlockGrid g = make_block_grid(type, x.data(), seed % 2 ? 0.9f : 1.0f);
      int codes[32];
      for (int j = 0; j < 32; ++j) codes[j] = g.nearest(x[j]);
      std::vector<uint8_t> bytes(tensor_type_block_bytes(type));
      pack_block(g, codes, bytes.data());
      float back[32];
      dequantize_row(type, bytes.data(), back, 32);
      for (int j = 0; j < 32; ++j) EXPECT_FLOAT_EQ(back[j], g.value(codes[j])) << j;
    }
  }
}

TEST(BlockGrid, NearestIsTheClosestCode) {
  for (TensorType type : kTypes) {
    SCOPED_TRACE(tensor_type_name(type));
    const std::vector<float> x = random_block(7);
    const BlockGrid g = make_block_grid(type, x.data());
    for (float v : x) {
      const float got = std::fabs(g.value(g.nearest(v)) - v);
      for (int c = 0; c < g.codes(); ++c) {
        if (type == TensorType::kQ8_0 && c == 0) continue;  // -128 is not a Q8_0 level
        EXPECT_LE(got, std::fabs(g.value(c) - v) + 1e-7f);
      }
    }
  }
}

TEST(BlockGrid, RoundToNearestGridIsAsGoodAsQuantizeRow) {
  for (TensorType type : kTypes) {
    SCOPED_TRACE(tensor_type_name(type));
    double grid_err = 0.0, rtn_err = 0.0;
    for (uint32_t seed = 0; seed < 50; ++seed) {
      const std::vector<float> x = random_block(100 + seed);
      std::vector<uint8_t> a(tensor_type_block_bytes(type)), b(a.size());
      quantize_row_weighted(type, x.data(), nullptr, a.data(), 32);
      quantize_row(type, x.data(), b.data(), 32);
      float qa[32], qb[32];
      dequantize_row(type, a.data(), qa, 32);
      dequantize_row(type, b.data(), qb, 32);
      for (int j = 0; j < 32; ++j) {
        grid_err += (qa[j] - x[j]) * (qa[j] - x[j]);
        rtn_err += (qb[j] - x[j]) * (qb[j] - x[j]);
      }
    }
    EXPECT_LE(grid_err, rtn_err * 1.01);
  }
}

TEST(BlockGrid, WeightedSearchLowersTheWeightedError) {
  // Half the channels matter 100x more: the searched scale must fit them better than the
  // round-to-nearest scale does.
  std::vector<float> w(32);
  for (int j = 0; j < 32; ++j) w[j] = j % 2 ? 100.0f : 1.0f;
  for (TensorType type : {TensorType::kQ4_0, TensorType::kIQ4_NL, TensorType::kQ4_1}) {
    SCOPED_TRACE(tensor_type_name(type));
    double searched = 0.0, plain = 0.0;
    for (uint32_t seed = 0; seed < 50; ++seed) {
      const std::vector<float> x = random_block(300 + seed);
      int codes[32], plain_codes[32];
      const BlockGrid g = search_block_grid(type, x.data(), w.data(), codes);
      const BlockGrid p = search_block_grid(type, x.data(), nullptr, plain_codes);
      for (int j = 0; j < 32; ++j) {
        searched += w[j] * std::pow(x[j] - g.value(codes[j]), 2);
        plain += w[j] * std::pow(x[j] - p.value(plain_codes[j]), 2);
      }
    }
    EXPECT_LT(searched, plain * 0.97);
  }
}

}  // namespace
}  // namespace rapide::quant
