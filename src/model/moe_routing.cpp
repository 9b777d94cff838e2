#include "model/moe_routing.h"

#include <cmath>

#include "kernels/ops.h"

namespace rapide {

void route_token(float* logits, int n_experts, int k, const ExpertRouting& rule, int* ids,
                 float* weights) {
  if (rule.gating == ExpertGating::kSigmoid) {
    // ggml_sigmoid's formula.
    for (int e = 0; e < n_experts; ++e) logits[e] = 1.0f / (1.0f + std::exp(-logits[e]));
  } else {
    softmax(logits, n_experts);
  }
  const float* bias = rule.selection_bias;
  auto selection = [&](int e) { return bias != nullptr ? logits[e] + bias[e] : logits[e]; };
  // k is small (2 of 8 for Mixtral, 8 of 64 for Qwen2-MoE, 8 of 256 for DeepSeek-V3):
  // repeated selection is enough.
  float sum = 0.0f;
  for (int s = 0; s < k; ++s) {
    int best = -1;
    for (int e = 0; e < n_experts; ++e) {
      bool taken = false;
      for (int t = 0; t < s; ++t) taken = taken || ids[t] == e;
      if (!taken && (best < 0 || selection(e) > selection(best))) best = e;
    }
    ids[s] = best;
    weights[s] = logits[best];  // the unbiased score
    sum += weights[s];
  }
  if (rule.normalize) {
    for (int s = 0; s < k; ++s) weights[s] /= sum;
  }
  if (rule.scale != 1.0f) {
    for (int s = 0; s < k; ++s) weights[s] *= rule.scale;
  }
}

void route_token(float* logits, int n_experts, int k, bool normalize, int* ids, float* weights) {
  ExpertRouting rule;
  rule.normalize = normalize;
  route_token(logits, n_experts, k, rule, ids, weights);
}

}  // namespace rapide
