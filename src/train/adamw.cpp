#include "train/adamw.h"

#include <cmath>
#include <numbers>

namespace rapide::train {

float scheduled_lr(const AdamWOptions& o, int64_t step, int64_t total_steps) {
  if (step < o.warmup_steps) {
    return o.lr * static_cast<float>(step + 1) / static_cast<float>(o.warmup_steps);
  }
  const int64_t decay_steps = total_steps - o.warmup_steps;
  if (decay_steps <= 1) return o.lr;
  const double progress =
      static_cast<double>(step - o.warmup_steps) / static_cast<double>(decay_steps - 1);
  const double cosine = 0.5 * (1.0 + std::cos(std::numbers::pi * std::min(1.0, progress)));
  return static_cast<float>(o.min_lr + (o.lr - o.min_lr) * cosine);
}

AdamW::AdamW(const AdamWOptions& options, int64_t parameter_count)
    : o_(options),
      m_(static_cast<size_t>(parameter_count), 0.0f),
      v_(static_cast<size_t>(parameter_count), 0.0f) {}

double AdamW::step(TrainModel& model, float lr) {
  std::vector<float>& grads = model.grads();
  double norm_squared = 0.0;
  for (float g : grads) norm_squared += static_cast<double>(g) * g;
  const double norm = std::sqrt(norm_squared);
  const float clip =
      o_.clip_norm > 0.0f && norm > o_.clip_norm ? static_cast<float>(o_.clip_norm / norm) : 1.0f;
  ++updates_;
  const float correction1 = 1.0f - std::pow(o_.beta1, static_cast<float>(updates_));
  const float correction2 = 1.0f - std::pow(o_.beta2, static_cast<float>(updates_));
  std::vector<float>& params = model.params();
  for (const ParamTensor& t : model.tensors()) {
    const float decay = t.matrix ? lr * o_.weight_decay : 0.0f;
    for (int64_t i = t.offset; i < t.offset + t.size; ++i) {
      const float g = grads[i] * clip;
      m_[i] = o_.beta1 * m_[i] + (1.0f - o_.beta1) * g;
      v_[i] = o_.beta2 * v_[i] + (1.0f - o_.beta2) * g * g;
      const float m_hat = m_[i] / correction1, v_hat = v_[i] / correction2;
      params[i] -= lr * m_hat / (std::sqrt(v_hat) + o_.eps) + decay * params[i];
    }
  }
  return norm;
}

}  // namespace rapide::train
