// Knowledge distillation's objective for the training loop: the teacher, run by the
// inference engine (model/model.h) on the same windows as the student, hands over its
// top-k temperature-scaled distribution per position (train/losses.h); the student's loss is
// the KL divergence to it, optionally mixed with cross-entropy on the data.
#pragma once

#include <memory>

#include "base/thread_pool.h"
#include "model/contiguous_kv_store.h"
#include "model/model.h"
#include "train/losses.h"
#include "train/trainer.h"

namespace rapide::train {

struct DistillOptions {
  int top_k = 64;
  DistillLoss loss{.temperature = 2.0f, .ce_weight = 0.0f};
};

class DistillObjective final : public Objective {
 public:
  // Throws kInvalidArgument when teacher and student vocabularies differ.
  DistillObjective(Model& teacher, ThreadPool& pool, int student_vocab,
                   const DistillOptions& options);
  double loss(const int32_t* windows, int batch, int seq, const float* logits, int vocab,
              float grad_scale, float* dlogits) override;

 private:
  Model& teacher_;
  ThreadPool& pool_;
  DistillOptions options_;
  std::unique_ptr<ContiguousKvStore> kv_;
  Batch batch_;
  TopK top_;
  std::vector<int32_t> targets_;
};

}  // namespace rapide::train
