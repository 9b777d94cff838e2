#include "model/moe_routing.h"

#include "kernels/ops.h"

namespace rapide {

void route_token(float* logits, int n_experts, int k, bool normalize, int* ids, float* weights) {
  softmax(logits, n_experts);
  // k is small (2 of 8 for Mixtral, 8 of 64 for Qwen2-MoE): repeated selection is enough.
  float sum = 0.0f;
  for (int s = 0; s < k; ++s) {
    int best = -1;
    for (int e = 0; e < n_experts; ++e) {
      bool taken = false;
      for (int t = 0; t < s; ++t) taken = taken || ids[t] == e;
      if (!taken && (best < 0 || logits[e] > logits[best])) best = e;
    }
    ids[s] = best;
    weights[s] = logits[best];
    sum += weights[s];
  }
  if (normalize) {
    for (int s = 0; s < k; ++s) weights[s] /= sum;
  }
}

}  // namespace rapide
