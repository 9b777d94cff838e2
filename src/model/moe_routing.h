// Top-k routing of a mixture-of-experts layer, as llama.cpp's build_moe_ffn computes it.
//
//   scores  p = softmax(router logits) over all experts (Mixtral, Qwen2-MoE, DeepSeek-V2),
//             or p = sigmoid(each logit) (DeepSeek-V3, expert_gating_func = 2)
//   choice  the k largest p (the lower expert index first on a tie); with a selection bias
//           (DeepSeek-V3's exp_probs_b.bias) the k largest p + bias instead
//   weights the chosen experts' unbiased p, rescaled to sum to 1 when `normalize` (Mixtral,
//           DeepSeek with expert_weights_norm) or as they are (Qwen2-MoE), then times
//           `scale` (DeepSeek's expert_weights_scale)
#pragma once

#include "formats/model_config.h"

namespace rapide {

struct ExpertRouting {
  ExpertGating gating = ExpertGating::kSoftmax;
  bool normalize = true;
  float scale = 1.0f;
  const float* selection_bias = nullptr;  // n_experts values, added for the choice only
};

// logits: n_experts router outputs of one token, overwritten with the scores p.
// Writes k expert ids (largest selection value first) and their weights.
void route_token(float* logits, int n_experts, int k, const ExpertRouting& rule, int* ids,
                 float* weights);

// Softmax scores, no bias, no scale: Mixtral (normalize) and Qwen2-MoE (not).
void route_token(float* logits, int n_experts, int k, bool normalize, int* ids, float* weights);

}  // namespace rapide
