// Forward and backward of the operations between the matrix products of a Llama block, on
// rows of F32 (n rows, or B sequences of T positions for attention). Each forward keeps what
// its backward needs in caller-owned buffers; each backward *adds* into the gradients of
// its parameters and writes (or, where noted, adds) the gradient of its input. The
// finite-difference checks in tests/unit/train/train_ops_test.cpp pin every one of them.
#pragma once

#include <cstdint>
#include <vector>

namespace rapide::train {

// y = x * r * w with r = 1 / sqrt(mean(x^2) + eps) per row; r[n] is kept for the backward.
void rms_norm_forward(const float* x, const float* w, int64_t n, int64_t dim, float eps, float* y,
                      float* r);
// dx = gradient of the input (overwritten unless accumulate), dw += gradient of the weight.
void rms_norm_backward(const float* x, const float* w, const float* r, const float* dy, int64_t n,
                       int64_t dim, float* dx, float* dw, bool accumulate);

// Rotation angles of positions 0..T-1 as the inference engine computes them
// (model/model.cpp prepare_rope): cos and sin, T x head_dim/2 each.
struct RopeTable {
  int positions = 0;
  int half = 0;
  bool neox = false;
  std::vector<float> cos, sin, neg_sin;
  RopeTable(int positions, int head_dim, float theta, float scale, bool neox);
};
// Rotates rows of n_heads heads in place; row i has position i % T. backward = true
// rotates by the opposite angle (the transpose of the rotation), which maps the gradient
// of the output to the gradient of the input.
void rope_apply(float* x, int64_t rows, int n_heads, int head_dim, const RopeTable& table,
                bool backward);

// Causal grouped-query attention over B sequences of T positions: q [B*T][H*hd],
// k, v [B*T][KV*hd] -> out [B*T][H*hd]. probs [B][H][T][T] keeps the softmax for the
// backward (entries above the diagonal are 0).
struct AttentionShape {
  int batch = 0, seq = 0, heads = 0, kv_heads = 0, head_dim = 0;
  float scale = 0.0f;
};
void attention_forward(const AttentionShape& s, const float* q, const float* k, const float* v,
                       float* probs, float* out);
// dq, dk and dv are overwritten.
void attention_backward(const AttentionShape& s, const float* q, const float* k, const float* v,
                        const float* probs, const float* dout, float* dq, float* dk, float* dv);

// h = silu(g) * u over n values.
void swiglu_forward(const float* g, const float* u, int64_t n, float* h);
// dg, du overwritten.
void swiglu_backward(const float* g, const float* u, const float* dh, int64_t n, float* dg,
                     float* du);

}  // namespace rapide::train
