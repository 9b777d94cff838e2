// Top-k routing of a mixture-of-experts layer, as llama.cpp's build_moe_ffn computes it
// for Mixtral and Qwen2-MoE: p = softmax(router logits) over all experts, the k largest p
// chosen (the lower expert index first on a tie), and their p used as weights, rescaled
// to sum to 1 when `normalize` (Mixtral) or as they are (Qwen2-MoE).
#pragma once

namespace rapide {

// logits: n_experts router outputs of one token, overwritten with the probabilities.
// Writes k expert ids (largest probability first) and their weights.
void route_token(float* logits, int n_experts, int k, bool normalize, int* ids, float* weights);

}  // namespace rapide
