#include "train/losses.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace rapide::train {

namespace {

// softmax(x / temperature) into p; returns log of the normaliser (of the scaled logits).
double softmax(const float* x, int n, float temperature, float* p) {
  float max_value = x[0];
  for (int i = 1; i < n; ++i) max_value = std::max(max_value, x[i]);
  double sum = 0.0;
  for (int i = 0; i < n; ++i) {
    p[i] = std::exp((x[i] - max_value) / temperature);
    sum += p[i];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int i = 0; i < n; ++i) p[i] *= inv;
  return max_value / temperature + std::log(sum);
}

}  // namespace

double cross_entropy(const float* logits, int64_t n, int vocab, const int32_t* targets,
                     float grad_scale, float* dlogits) {
  double total = 0.0;
  const float scale = grad_scale / static_cast<float>(n);
  for (int64_t i = 0; i < n; ++i) {
    const float* row = logits + i * vocab;
    float* d = dlogits + i * vocab;
    const double log_z = softmax(row, vocab, 1.0f, d);
    total += log_z - row[targets[i]];
    for (int v = 0; v < vocab; ++v) d[v] *= scale;
    d[targets[i]] -= scale;
  }
  return total / static_cast<double>(n);
}

void teacher_top_k(const float* logits, int64_t n, int vocab, int k, float temperature, TopK& out,
                   int64_t first_row) {
  k = std::min(k, vocab);
  out.k = k;
  out.ids.resize(static_cast<size_t>(first_row + n) * k);
  out.probs.resize(out.ids.size());
  std::vector<int32_t> order(static_cast<size_t>(vocab));
  std::vector<float> p(static_cast<size_t>(vocab));
  for (int64_t i = 0; i < n; ++i) {
    softmax(logits + i * vocab, vocab, temperature, p.data());
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [&](int32_t a, int32_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
    float kept = 0.0f;
    for (int j = 0; j < k; ++j) kept += p[order[j]];
    const size_t at = static_cast<size_t>(first_row + i) * k;
    for (int j = 0; j < k; ++j) {
      out.ids[at + j] = order[j];
      out.probs[at + j] = p[order[j]] / kept;
    }
  }
}

// With q = softmax(z / T) and teacher p on k tokens (sum 1):
// d(T^2 KL(p||q)) / dz = T (q - p); d CE / dz = softmax(z) - onehot.
double distill_loss(const float* logits, int64_t n, int vocab, const TopK& teacher,
                    const int32_t* targets, const DistillLoss& how, float grad_scale,
                    float* dlogits) {
  const float t = how.temperature, w = how.ce_weight;
  const float scale = grad_scale / static_cast<float>(n);
  std::vector<float> ce_grad(w > 0.0f ? static_cast<size_t>(vocab) : 0);
  double total = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const float* row = logits + i * vocab;
    float* d = dlogits + i * vocab;
    const double log_z = softmax(row, vocab, t, d);
    const int32_t* ids = teacher.ids.data() + i * teacher.k;
    const float* p = teacher.probs.data() + i * teacher.k;
    double kl = 0.0;
    for (int j = 0; j < teacher.k; ++j) {
      if (p[j] <= 0.0f) continue;
      const double log_q = row[ids[j]] / t - log_z;
      kl += p[j] * (std::log(p[j]) - log_q);
    }
    total += (1.0f - w) * kl * t * t;
    const float kl_scale = (1.0f - w) * t * scale;
    for (int v = 0; v < vocab; ++v) d[v] *= kl_scale;
    for (int j = 0; j < teacher.k; ++j) d[ids[j]] -= kl_scale * p[j];
    if (w > 0.0f) {
      const double ce_log_z = softmax(row, vocab, 1.0f, ce_grad.data());
      total += w * (ce_log_z - row[targets[i]]);
      for (int v = 0; v < vocab; ++v) d[v] += w * scale * ce_grad[v];
      d[targets[i]] -= w * scale;
    }
  }
  return total / static_cast<double>(n);
}

}  // namespace rapide::train
