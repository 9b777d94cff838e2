// Rotary angles for every scaling variant (model/rope.h) against independent formulations:
// the plain and Llama 3 frequencies in double, YaRN as transformers' _compute_yarn_parameters
// writes it (an inverse-frequency blend and a cos/sin attention factor, where ggml blends
// angles and scales its magnitude: the same function written another way), partial rotary
// through the ops kernel, and LongRoPE's choice of factor set by the serving context through
// a whole model.
#include "model/rope.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <numbers>
#include <random>

#include "formats/gguf_reader.h"
#include "formats/gguf_writer.h"
#include "golden/greedy_runner.h"
#include "kernels/ops.h"
#include "test_paths.h"

namespace rapide {
namespace {

constexpr double kPi = std::numbers::pi;

TEST(Rope, PlainAndFactorAnglesMatchDouble) {
  ModelConfig c;
  c.head_dim = 64;
  c.rope_theta = 500000.0f;
  std::vector<float> factors(32);
  for (int i = 0; i < 32; ++i) factors[i] = 1.0f + 0.25f * static_cast<float>(i % 5);
  const float* const sets[] = {nullptr, factors.data()};
  for (const float* f : sets) {
    const RopeParams p = rope_params(c, false, f);
    std::vector<float> cos(32), sin(32);
    for (int pos : {0, 1, 7, 200}) {
      rope_angles(p, pos, cos.data(), sin.data());
      for (int i = 0; i < 32; ++i) {
        double theta = pos * std::pow(500000.0, -2.0 * i / 64.0);
        if (f != nullptr) theta /= f[i];
        EXPECT_NEAR(cos[i], std::cos(theta), 2e-5) << "pos " << pos << " i " << i;
        EXPECT_NEAR(sin[i], std::sin(theta), 2e-5) << "pos " << pos << " i " << i;
      }
    }
  }
}

// transformers' YaRN (modeling_rope_utils._compute_yarn_parameters), in double.
void hf_yarn(double base, int dim, double factor, int orig, double beta_fast, double beta_slow,
             int pos, std::vector<double>& cos, std::vector<double>& sin) {
  const double attention_factor = 0.1 * std::log(factor) + 1.0;
  const auto corr = [&](double rotations) {
    return dim * std::log(orig / (rotations * 2 * kPi)) / (2 * std::log(base));
  };
  const double low = std::max(std::floor(corr(beta_fast)), 0.0);
  const double high = std::min(std::ceil(corr(beta_slow)), dim - 1.0);
  cos.resize(dim / 2);
  sin.resize(dim / 2);
  for (int i = 0; i < dim / 2; ++i) {
    const double pos_freq = std::pow(base, 2.0 * i / dim);
    const double extrapolation = 1.0 / pos_freq, interpolation = 1.0 / (factor * pos_freq);
    const double ramp =
        std::clamp((i - low) / (high == low ? high + 0.001 - low : high - low), 0.0, 1.0);
    const double extrapolation_factor = 1.0 - ramp;
    const double inv_freq =
        interpolation * (1 - extrapolation_factor) + extrapolation * extrapolation_factor;
    cos[i] = std::cos(pos * inv_freq) * attention_factor;
    sin[i] = std::sin(pos * inv_freq) * attention_factor;
  }
}

TEST(Rope, YarnMatchesTransformers) {
  ModelConfig c;
  c.head_dim = 128;
  c.rope_theta = 1000000.0f;
  c.rope_scaling = RopeScaling::kYarn;
  c.rope_scale = 4.0f;
  c.rope_orig_context = 32768;
  c.yarn_ext_factor = 1.0f;
  const RopeParams p = rope_params(c, false, nullptr);
  EXPECT_GT(p.corr_high, p.corr_low);
  std::vector<float> cos(64), sin(64);
  std::vector<double> want_cos, want_sin;
  int blended = 0;
  for (int pos : {1, 33, 517, 4000}) {
    rope_angles(p, pos, cos.data(), sin.data());
    hf_yarn(1000000.0, 128, 4.0, 32768, 32.0, 1.0, pos, want_cos, want_sin);
    for (int i = 0; i < 64; ++i) {
      // float angles: pos x 6e-8 relative error at most
      const double tol = 1e-5 + 1.2e-7 * pos;
      EXPECT_NEAR(cos[i], want_cos[i], tol) << "pos " << pos << " i " << i;
      EXPECT_NEAR(sin[i], want_sin[i], tol) << "pos " << pos << " i " << i;
      if (i > p.corr_low && i < p.corr_high) ++blended;
    }
  }
  EXPECT_GT(blended, 0) << "the test must cover the ramp";
  // The magnitude: ggml's mscale 1 + 0.1 ln(4).
  rope_angles(p, 0, cos.data(), sin.data());
  EXPECT_NEAR(cos[0], 1.0 + 0.1 * std::log(4.0), 1e-6);
}

TEST(Rope, PartialRotaryLeavesTheTailAlone) {
  constexpr int kHead = 16, kRot = 8;
  std::vector<float> x(2 * kHead), y;
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.1f * static_cast<float>(i) - 1.0f;
  ModelConfig c;
  c.head_dim = kHead;
  c.rope_dim = kRot;
  const RopeParams p = rope_params(c, false, nullptr);
  std::vector<float> cos(kRot / 2), sin(kRot / 2);
  rope_angles(p, 11, cos.data(), sin.data());
  for (bool neox : {false, true}) {
    y = x;
    rope_rotate(y.data(), 2, kHead, kRot, cos.data(), sin.data(), neox);
    for (int h = 0; h < 2; ++h) {
      const float* a = x.data() + h * kHead;
      const float* b = y.data() + h * kHead;
      for (int d = kRot; d < kHead; ++d) EXPECT_EQ(b[d], a[d]) << "tail dim " << d;
      for (int i = 0; i < kRot / 2; ++i) {
        const int u = neox ? i : 2 * i, v = neox ? i + kRot / 2 : 2 * i + 1;
        const double theta = 11 * std::pow(10000.0, -2.0 * i / kRot);
        EXPECT_NEAR(b[u], a[u] * std::cos(theta) - a[v] * std::sin(theta), 1e-5);
        EXPECT_NEAR(b[v], a[u] * std::sin(theta) + a[v] * std::cos(theta), 1e-5);
      }
    }
  }
}

// LongRoPE: a copy of llamacpp2's llama3-rope file whose short factors are its Llama 3
// factors and whose long factors are all 1. Served within the original context it must
// compute exactly what the llama3-rope file computes, beyond it exactly what the file
// without factors computes.
TEST(Rope, LongRopeChoosesItsFactorsByTheServingContext) {
  const std::string dir = "reference/llamacpp2/models/";
  RAPIDE_REQUIRE_SHARED(dir + "llama3-rope-F32.gguf");
  const GgufFile src = GgufFile::open(testing::shared_path(dir + "llama3-rope-F32.gguf"));
  GgufWriter w;
  for (const GgufKeyValue& kv : src.metadata()) w.set(kv.key, kv.value);
  w.set("llama.rope.scaling.type", GgufValue::string("longrope"));
  w.set("llama.rope.scaling.original_context_length", GgufValue::u32(128));
  std::vector<float> ones(32, 1.0f);
  for (const GgufTensorInfo& t : src.tensors()) {
    if (t.name == "rope_freqs.weight") {
      w.add_tensor("rope_factors_short.weight", t.type, t.shape, t.data, t.size_bytes);
      w.add_tensor("rope_factors_long.weight", TensorType::kF32, t.shape, ones.data(), 128);
    } else {
      w.add_tensor(t.name, t.type, t.shape, t.data, t.size_bytes);
    }
  }
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() /
      ("rapide-longrope-" + std::to_string(std::random_device{}()) + ".gguf");
  w.write(path.string());
  testing::LoadedForTest longrope = testing::load_for_test(path.string());
  std::filesystem::remove(path);
  testing::LoadedForTest with =
      testing::load_for_test(testing::shared_path(dir + "llama3-rope-F32.gguf"));
  testing::LoadedForTest without =
      testing::load_for_test(testing::shared_path(dir + "llama3-rope-nofreqs-F32.gguf"));
  ThreadPool pool(2);
  const auto logits = [&](Model& m) {
    ContiguousKvStore kv(m.config(), 1, 40);
    Batch batch;
    for (int p = 0; p < 40; ++p) batch.add((p * 37 + 11) % 512, 0, p, true);
    const std::span<const float> l = m.forward(batch, kv, pool);
    return std::vector<float>(l.begin(), l.end());
  };
  longrope.model->set_serving_context(128);
  EXPECT_EQ(logits(*longrope.model), logits(*with.model)) << "short factors within 128";
  longrope.model->set_serving_context(129);
  EXPECT_EQ(logits(*longrope.model), logits(*without.model)) << "long factors beyond 128";
}

}  // namespace
}  // namespace rapide
