// Every training operation's backward against central finite differences of its forward:
// the scalar checked is sum(output * c) for a fixed random c, whose gradient with respect
// to the output is c.
#include "train/train_ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "grad_check.h"
#include "train/losses.h"

namespace rapide::train {
namespace {

using testing::expect_gradient;

std::vector<float> random_vector(size_t n, uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

double weighted_sum(const std::vector<float>& y, const std::vector<float>& c) {
  double s = 0.0;
  for (size_t i = 0; i < y.size(); ++i) s += static_cast<double>(y[i]) * c[i];
  return s;
}

TEST(TrainOps, RmsNormBackwardMatchesFiniteDifferences) {
  const int n = 3, dim = 8;
  std::vector<float> x = random_vector(n * dim, 1), w = random_vector(dim, 2);
  const std::vector<float> c = random_vector(n * dim, 3);
  std::vector<float> y(n * dim), r(n), dx(n * dim), dw(dim, 0.0f);
  auto f = [&] {
    rms_norm_forward(x.data(), w.data(), n, dim, 1e-5f, y.data(), r.data());
    return weighted_sum(y, c);
  };
  f();
  rms_norm_backward(x.data(), w.data(), r.data(), c.data(), n, dim, dx.data(), dw.data(), false);
  expect_gradient("dx", x.data(), n * dim, f, dx.data());
  expect_gradient("dw", w.data(), dim, f, dw.data());
}

TEST(TrainOps, RopeBackwardIsTheInverseRotation) {
  const int T = 5, heads = 2, hd = 8;
  const RopeTable table(T, hd, 10000.0f, 1.0f, false);
  std::vector<float> x = random_vector(T * heads * hd, 4);
  const std::vector<float> c = random_vector(x.size(), 5);
  auto f = [&] {
    std::vector<float> y = x;
    rope_apply(y.data(), T, heads, hd, table, false);
    return weighted_sum(y, c);
  };
  std::vector<float> dx = c;
  rope_apply(dx.data(), T, heads, hd, table, true);
  expect_gradient("dx", x.data(), static_cast<int64_t>(x.size()), f, dx.data());
  // Position 0 is not rotated; position 1 rotates the first pair by 1 radian.
  std::vector<float> y = {1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0};
  rope_apply(y.data(), 2, 1, hd, table, false);
  EXPECT_FLOAT_EQ(y[0], 1.0f);
  EXPECT_NEAR(y[8], std::cos(1.0f), 1e-6);
  EXPECT_NEAR(y[9], std::sin(1.0f), 1e-6);
}

TEST(TrainOps, GroupedQueryAttentionBackwardMatchesFiniteDifferences) {
  const AttentionShape s{2, 4, 4, 2, 4, 0.5f};
  const size_t nq = 2 * 4 * 4 * 4, nkv = 2 * 4 * 2 * 4;
  std::vector<float> q = random_vector(nq, 6), k = random_vector(nkv, 7), v = random_vector(nkv, 8);
  const std::vector<float> c = random_vector(nq, 9);
  std::vector<float> probs(2 * 4 * 4 * 4), out(nq), dq(nq), dk(nkv), dv(nkv);
  auto f = [&] {
    attention_forward(s, q.data(), k.data(), v.data(), probs.data(), out.data());
    return weighted_sum(out, c);
  };
  f();
  attention_backward(s, q.data(), k.data(), v.data(), probs.data(), c.data(), dq.data(), dk.data(),
                     dv.data());
  expect_gradient("dq", q.data(), nq, f, dq.data());
  expect_gradient("dk", k.data(), nkv, f, dk.data());
  expect_gradient("dv", v.data(), nkv, f, dv.data());
  // Causality: the first position attends only to itself.
  for (int h = 0; h < 4; ++h) EXPECT_FLOAT_EQ(probs[h * 16 + 0], 1.0f);
}

TEST(TrainOps, SwigluBackwardMatchesFiniteDifferences) {
  std::vector<float> g = random_vector(16, 10, 2.0f), u = random_vector(16, 11);
  const std::vector<float> c = random_vector(16, 12);
  std::vector<float> h(16), dg(16), du(16);
  auto f = [&] {
    swiglu_forward(g.data(), u.data(), 16, h.data());
    return weighted_sum(h, c);
  };
  swiglu_backward(g.data(), u.data(), c.data(), 16, dg.data(), du.data());
  expect_gradient("dg", g.data(), 16, f, dg.data());
  expect_gradient("du", u.data(), 16, f, du.data());
}

TEST(TrainOps, CrossEntropyValueAndGradient) {
  const int n = 3, vocab = 6;
  std::vector<float> logits = random_vector(n * vocab, 13), d(n * vocab);
  const std::vector<int32_t> targets = {0, 5, 2};
  auto f = [&] {
    std::vector<float> scratch(n * vocab);
    return cross_entropy(logits.data(), n, vocab, targets.data(), 1.0f, scratch.data());
  };
  cross_entropy(logits.data(), n, vocab, targets.data(), 1.0f, d.data());
  expect_gradient("dlogits", logits.data(), n * vocab, f, d.data(), 1e-2f, 1e-2);
  // Uniform logits: the loss is log(vocab).
  std::vector<float> flat(vocab, 0.5f), scratch(vocab);
  const int32_t t = 3;
  EXPECT_NEAR(cross_entropy(flat.data(), 1, vocab, &t, 1.0f, scratch.data()), std::log(6.0), 1e-6);
}

TEST(TrainOps, DistillationLossValueAndGradient) {
  const int n = 2, vocab = 8;
  const std::vector<float> teacher = random_vector(n * vocab, 14, 2.0f);
  std::vector<float> logits = random_vector(n * vocab, 15), d(n * vocab);
  const std::vector<int32_t> targets = {1, 7};
  TopK top;
  teacher_top_k(teacher.data(), n, vocab, 3, 2.0f, top);
  ASSERT_EQ(top.k, 3);
  for (int i = 0; i < n; ++i) {
    EXPECT_NEAR(top.probs[i * 3] + top.probs[i * 3 + 1] + top.probs[i * 3 + 2], 1.0, 1e-6);
    EXPECT_GE(top.probs[i * 3], top.probs[i * 3 + 1]);
  }
  const DistillLoss how{.temperature = 2.0f, .ce_weight = 0.3f};
  auto f = [&] {
    std::vector<float> scratch(n * vocab);
    return distill_loss(logits.data(), n, vocab, top, targets.data(), how, 1.0f, scratch.data());
  };
  distill_loss(logits.data(), n, vocab, top, targets.data(), how, 1.0f, d.data());
  expect_gradient("dlogits", logits.data(), n * vocab, f, d.data(), 1e-2f, 1e-2);
  // A student equal to the teacher, with k = vocab and no CE: the KL is 0.
  TopK all;
  teacher_top_k(teacher.data(), n, vocab, vocab, 1.0f, all);
  std::vector<float> scratch(n * vocab);
  EXPECT_NEAR(distill_loss(teacher.data(), n, vocab, all, targets.data(), DistillLoss{}, 1.0f,
                           scratch.data()),
              0.0, 1e-6);
}

}  // namespace
}  // namespace rapide::train
