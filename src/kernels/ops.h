// The small per-token operations of a transformer layer. They are cheap next to the matrix
// products, so they are written once, plainly, with llama.cpp's numerics (rms_norm sums
// squares in double; silu is x / (1 + e^-x)) so outputs track its reference runs.
#pragma once

#include <cstdint>

namespace rapide {

// out = x / sqrt(mean(x^2) + eps) * weight, over n elements (out may alias x).
void rms_norm(const float* x, const float* weight, int64_t n, float eps, float* out);

// dst += src over n elements.
void add_in_place(float* dst, const float* src, int64_t n);

// out = silu(gate) * up over n elements (out may alias gate or up).
void silu_mul(const float* gate, const float* up, int64_t n, float* out);

// Rotates each of n_heads vectors of head_dim values in x by the angles whose cosines and
// sines are given (head_dim / 2 each). neox = false rotates adjacent pairs (2i, 2i+1)
// (Llama's GGUF order); neox = true rotates (i, i + head_dim/2) (Qwen2, GPT-NeoX).
void rope_rotate(float* x, int n_heads, int head_dim, const float* cos, const float* sin,
                 bool neox);

}  // namespace rapide
