// The small per-token operations of a transformer layer, with llama.cpp's numerics (rms_norm
// sums squares in double; silu is x / (1 + e^-x); softmax sums in double) so outputs track
// its reference runs. Each has a plain scalar definition (ops_internal.h); the ones that
// cost something at prefill (exp in silu/softmax, the reductions) also have an AVX-512
// variant chosen at run time, within a few ulp of the scalar one.
#pragma once

#include <cstdint>

namespace rapide {

// out = x / sqrt(mean(x^2) + eps) * weight, over n elements (out may alias x).
void rms_norm(const float* x, const float* weight, int64_t n, float eps, float* out);

// out = (x - mean) / sqrt(variance + eps) * weight, over n elements (out may alias x): ggml's
// LLM_NORM without a bias (cohere2). Sums in double, as ggml_norm does. Scalar only: one call
// per row and layer costs as much as an rms_norm.
void layer_norm(const float* x, const float* weight, int64_t n, float eps, float* out);

// dst += src over n elements.
void add_in_place(float* dst, const float* src, int64_t n);

// out = a + b over n elements (out may alias a or b).
void add(const float* a, const float* b, int64_t n, float* out);

// x = exp(x - max x) / sum, in place over n elements.
void softmax(float* x, int64_t n);

// out = silu(gate) * up over n elements (out may alias gate or up).
void silu_mul(const float* gate, const float* up, int64_t n, float* out);

// out = gelu(gate) * up with GELU's tanh form, through llama.cpp's f16 table (ops_gelu.cpp).
void gelu_tanh_mul(const float* gate, const float* up, int64_t n, float* out);

// x = cap * tanh(x / cap) in place (gemma2's logit soft-cap; x / cap as x * (1 / cap)).
void soft_cap(float* x, int64_t n, float cap);

// out[i] = x[i] as IEEE half, rounded to nearest even (fp32_to_fp16 for every element).
void to_fp16(const float* x, int64_t n, uint16_t* out);

// Rotates each of n_heads vectors of head_dim values in x by the angles whose cosines and
// sines are given (head_dim / 2 each). neox = false rotates adjacent pairs (2i, 2i+1)
// (Llama's GGUF order); neox = true rotates (i, i + head_dim/2) (Qwen2, GPT-NeoX).
// Partial rotary: only the first rot_dims of each head rotate (pairs within those dims,
// cos/sin rot_dims / 2 each), the rest pass through (llama.cpp's n_rot < head size).
void rope_rotate(float* x, int n_heads, int head_dim, int rot_dims, const float* cos,
                 const float* sin, bool neox);
inline void rope_rotate(float* x, int n_heads, int head_dim, const float* cos, const float* sin,
                        bool neox) {
  rope_rotate(x, n_heads, head_dim, head_dim, cos, sin, neox);
}

}  // namespace rapide
