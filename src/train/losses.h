// Training losses over rows of logits, each returning the mean loss over the rows and
// writing its gradient with respect to the logits, times `grad_scale` (1 / accumulation
// steps), into dlogits.
//
// Distillation matches the teacher's distribution kept as its top-k tokens, temperature-
// scaled and renormalised over those k (what a teacher computed on the fly can hand over
// cheaply): KL(p_teacher || softmax(student / T)) * T^2 (Hinton et al.: the T^2 keeps the
// gradient's size independent of T), optionally mixed with cross-entropy on the data.
#pragma once

#include <cstdint>
#include <vector>

namespace rapide::train {

// Cross-entropy against targets[n] (the next tokens).
double cross_entropy(const float* logits, int64_t n, int vocab, const int32_t* targets,
                     float grad_scale, float* dlogits);

// A teacher's top-k distribution per row: ids and probabilities (summing to 1) of k tokens.
struct TopK {
  int k = 0;
  std::vector<int32_t> ids;  // n x k
  std::vector<float> probs;  // n x k
};
// The top-k of softmax(logits / temperature) for each of n rows.
void teacher_top_k(const float* logits, int64_t n, int vocab, int k, float temperature, TopK& out,
                   int64_t first_row = 0);

struct DistillLoss {
  float temperature = 1.0f;
  float ce_weight = 0.0f;  // loss = (1 - w) * KL * T^2 + w * CE
};
double distill_loss(const float* logits, int64_t n, int vocab, const TopK& teacher,
                    const int32_t* targets, const DistillLoss& how, float grad_scale,
                    float* dlogits);

}  // namespace rapide::train
