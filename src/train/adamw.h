// AdamW (Loshchilov & Hutter: weight decay decoupled from the gradient) with the learning
// rate schedule and the global-norm gradient clipping that small-model training uses:
// linear warm-up from 0, then cosine decay to min_lr at the last step.
#pragma once

#include <cstdint>
#include <vector>

#include "train/train_model.h"

namespace rapide::train {

struct AdamWOptions {
  float lr = 1e-3f;
  float min_lr = 1e-4f;
  int warmup_steps = 0;
  float beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f;
  float weight_decay = 0.1f;  // matrices only; norms are not decayed
  float clip_norm = 1.0f;     // 0: no clipping
};

// The learning rate of step (0-based) out of total_steps.
float scheduled_lr(const AdamWOptions& o, int64_t step, int64_t total_steps);

class AdamW {
 public:
  AdamW(const AdamWOptions& options, int64_t parameter_count);

  // One update of model.params() from model.grads() at learning rate lr (clipping first);
  // returns the gradient norm before clipping. Does not clear the gradients.
  double step(TrainModel& model, float lr);

  // The moment estimates and step count, for checkpoints.
  std::vector<float>& m() { return m_; }
  std::vector<float>& v() { return v_; }
  int64_t& updates() { return updates_; }

 private:
  AdamWOptions o_;
  std::vector<float> m_, v_;
  int64_t updates_ = 0;
};

}  // namespace rapide::train
