// Per-token ops: scalar definitions against hand-computed values, SIMD variants against
// the scalar ones.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "base/cpu_features.h"
#include "base/fp16.h"
#include "kernels/ops.h"
#include "kernels/ops_internal.h"

namespace rapide {
namespace {

std::vector<float> random_vector(int64_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

bool has_avx512() {
  return cpu_features().best_level() >= IsaLevel::kAvx512;
}

void expect_close(const std::vector<float>& a, const std::vector<float>& b, float rel) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_NEAR(a[i], b[i], rel * std::fabs(b[i]) + 1e-30f) << i;
  }
}

const int64_t kLengths[] = {1, 7, 16, 33, 768, 2051};

TEST(Ops, RmsNormDefinition) {
  const float x[4] = {1, -2, 3, -4};
  const float w[4] = {1, 1, 2, 0.5f};
  float out[4];
  ops::scalar::rms_norm(x, w, 4, 1e-5f, out);
  const float scale = 1.0f / std::sqrt(30.0f / 4 + 1e-5f);
  EXPECT_FLOAT_EQ(out[0], 1 * scale);
  EXPECT_FLOAT_EQ(out[2], 3 * scale * 2);
  EXPECT_FLOAT_EQ(out[3], -4 * scale * 0.5f);
}

// The epsilon is what keeps a zero (or tiny) hidden state finite: without it a zero row
// is 0/0. Every variant, through the dispatched entry point too.
TEST(Ops, RmsNormEpsilonKeepsSmallRowsFinite) {
  const std::vector<float> zero(33, 0.0f), w(33, 1.0f);
  std::vector<float> tiny(33, 1e-4f);  // mean square 1e-8, well under eps
  std::vector<float> out(33);
  using Kernel = void (*)(const float*, const float*, int64_t, float, float*);
  std::vector<std::pair<const char*, Kernel>> kernels = {{"scalar", ops::scalar::rms_norm},
                                                         {"dispatched", rms_norm}};
  if (has_avx512()) kernels.push_back({"avx512", ops::avx512::rms_norm});
  for (const auto& [name, kernel] : kernels) {
    kernel(zero.data(), w.data(), 33, 1e-5f, out.data());
    for (float v : out) ASSERT_EQ(v, 0.0f) << name;
    kernel(tiny.data(), w.data(), 33, 1e-5f, out.data());
    // 1e-4 / sqrt(1e-8 + 1e-5): eps dominates; without it every element would be 1.
    for (float v : out) ASSERT_NEAR(v, 1e-4f / std::sqrt(1e-8f + 1e-5f), 1e-6f) << name;
  }
}

TEST(Ops, SiluMulAndSoftmaxDefinitions) {
  const float g[3] = {0, 2, -3}, u[3] = {5, 1, 2};
  float out[3];
  ops::scalar::silu_mul(g, u, 3, out);
  EXPECT_FLOAT_EQ(out[0], 0);
  EXPECT_FLOAT_EQ(out[1], 2 / (1 + std::exp(-2.0f)));
  EXPECT_FLOAT_EQ(out[2], -3 / (1 + std::exp(3.0f)) * 2);
  float s[3] = {1, 2, 3};
  ops::scalar::softmax(s, 3);
  const float z = std::exp(-2.0f) + std::exp(-1.0f) + 1;
  EXPECT_FLOAT_EQ(s[0], std::exp(-2.0f) / z);
  EXPECT_FLOAT_EQ(s[2], 1 / z);
}

TEST(Ops, Avx512MatchesScalar) {
  if (!has_avx512()) GTEST_SKIP() << "no AVX-512 on this CPU";
  for (int64_t n : kLengths) {
    const std::vector<float> x = random_vector(n, 1, 3.0f), w = random_vector(n, 2, 1.0f);
    std::vector<float> a(x.size()), b(x.size());
    ops::scalar::rms_norm(x.data(), w.data(), n, 1e-6f, a.data());
    ops::avx512::rms_norm(x.data(), w.data(), n, 1e-6f, b.data());
    expect_close(b, a, 1e-6f);
    ops::scalar::add(x.data(), w.data(), n, a.data());
    ops::avx512::add(x.data(), w.data(), n, b.data());
    EXPECT_EQ(a, b);
    ops::scalar::silu_mul(x.data(), w.data(), n, a.data());
    ops::avx512::silu_mul(x.data(), w.data(), n, b.data());
    expect_close(b, a, 4e-7f);
    a = x;
    b = x;
    ops::scalar::softmax(a.data(), n);
    ops::avx512::softmax(b.data(), n);
    expect_close(b, a, 1e-6f);
  }
}

TEST(Ops, Avx512ExtremeInputs) {
  if (!has_avx512()) GTEST_SKIP() << "no AVX-512 on this CPU";
  std::vector<float> g = {-200, -100, -88, -20, 20, 88, 100, 200}, u(g.size(), 1.0f);
  std::vector<float> a(g.size()), b(g.size());
  ops::scalar::silu_mul(g.data(), u.data(), 8, a.data());
  ops::avx512::silu_mul(g.data(), u.data(), 8, b.data());
  for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(b[i], a[i], 1e-6f * std::fabs(a[i]) + 1e-30f);
  std::vector<float> s = {-1e30f, 0, 1e4f, 1e4f};
  ops::avx512::softmax(s.data(), 4);
  EXPECT_EQ(s[0], 0.0f);
  EXPECT_FLOAT_EQ(s[2], 0.5f);
}

// The KV cache's f16 conversion: the vector one must round exactly as the software one,
// on ordinary values, ties, overflow, subnormals, signed zeros, infinities and NaN.
TEST(Ops, Avx512ToFp16MatchesScalarBitForBit) {
  if (!has_avx512()) GTEST_SKIP() << "no AVX-512 on this CPU";
  std::vector<float> x = random_vector(1000, 9, 30.0f);
  const float specials[] = {0.0f,
                            -0.0f,
                            1.0f + 1.0f / 2048,
                            1.0f + 3.0f / 2048,
                            65504.0f,
                            65519.0f,
                            65520.0f,
                            -70000.0f,
                            6.0e-8f,
                            3.0e-8f,
                            2.9e-8f,
                            1.0e-5f,
                            1.0e-40f,
                            INFINITY,
                            -INFINITY,
                            NAN};
  x.insert(x.end(), std::begin(specials), std::end(specials));
  for (const int64_t n :
       {int64_t{0}, int64_t{1}, int64_t{15}, int64_t{17}, static_cast<int64_t>(x.size())}) {
    std::vector<uint16_t> a(x.size(), 0x1234), b(x.size(), 0x1234);
    ops::scalar::to_fp16(x.data() + x.size() - n, n, a.data());
    ops::avx512::to_fp16(x.data() + x.size() - n, n, b.data());
    EXPECT_EQ(a, b) << "n = " << n;  // including the untouched tail past n
  }
}

// GeGLU's table lookup: the AVX2 twin gives the scalar bits for every f16 input (each table
// entry reached), the +-10 pass-through edges, specials, tails of every length, and
// non-unit `up` values.
TEST(Ops, Avx2GeluMatchesScalarBitForBit) {
  if (active_isa_level() < IsaLevel::kAvx2) GTEST_SKIP() << "no AVX2/F16C on this CPU";
  std::vector<float> gate;
  for (uint32_t h = 0; h < 65536; ++h) gate.push_back(fp16_to_fp32(static_cast<uint16_t>(h)));
  const std::vector<float> more = random_vector(1000, 11, 12.0f);
  gate.insert(gate.end(), more.begin(), more.end());
  for (float v : {-10.0f, 10.0f, std::nextafter(-10.0f, 0.0f), std::nextafter(10.0f, 0.0f),
                  std::nextafter(-10.0f, -20.0f), std::nextafter(10.0f, 20.0f), 65520.0f, -1e30f,
                  1e30f, 1e-40f, -0.0f}) {
    gate.push_back(v);
  }
  const std::vector<float> up = random_vector(gate.size(), 12, 3.0f);
  for (const size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{9}, gate.size()}) {
    std::vector<float> a(gate.size(), 5.0f), b(gate.size(), 5.0f);
    ops::scalar::gelu_tanh_mul(gate.data(), up.data(), static_cast<int64_t>(n), a.data());
    ops::avx2::gelu_tanh_mul(gate.data(), up.data(), static_cast<int64_t>(n), b.data());
    size_t differ = 0;
    for (size_t i = 0; i < gate.size(); ++i) {
      const bool both_nan = std::isnan(a[i]) && std::isnan(b[i]);
      if (!both_nan && std::memcmp(&a[i], &b[i], sizeof(float)) != 0) ++differ;
    }
    EXPECT_EQ(differ, 0u) << "n = " << n;
  }
}

TEST(Ops, DispatchedEntryPointsAgreeWithScalar) {
  const std::vector<float> x = random_vector(100, 4, 2.0f), w = random_vector(100, 5, 1.0f);
  std::vector<float> a(100), b(100);
  rms_norm(x.data(), w.data(), 100, 1e-5f, a.data());
  ops::scalar::rms_norm(x.data(), w.data(), 100, 1e-5f, b.data());
  expect_close(a, b, 1e-6f);
  a = x;
  add_in_place(a.data(), w.data(), 100);
  ops::scalar::add(x.data(), w.data(), 100, b.data());
  EXPECT_EQ(a, b);
}

TEST(Ops, RopeStyles) {
  // Head of 4: normal rotates (0,1),(2,3); neox rotates (0,2),(1,3).
  const float cos[2] = {0.0f, 1.0f}, sin[2] = {1.0f, 0.0f};
  float v[4] = {1, 2, 3, 4};
  rope_rotate(v, 1, 4, cos, sin, false);
  EXPECT_FLOAT_EQ(v[0], -2);
  EXPECT_FLOAT_EQ(v[1], 1);
  EXPECT_FLOAT_EQ(v[2], 3);
  EXPECT_FLOAT_EQ(v[3], 4);
  float n[8] = {1, 2, 3, 4, 1, 2, 3, 4};
  rope_rotate(n, 2, 4, cos, sin, true);
  for (int h = 0; h < 2; ++h) {
    EXPECT_FLOAT_EQ(n[h * 4 + 0], -3);
    EXPECT_FLOAT_EQ(n[h * 4 + 2], 1);
    EXPECT_FLOAT_EQ(n[h * 4 + 1], 2);
    EXPECT_FLOAT_EQ(n[h * 4 + 3], 4);
  }
}

}  // namespace
}  // namespace rapide
