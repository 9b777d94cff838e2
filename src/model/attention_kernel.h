// The per-query attention loop, written once over an element-access policy and
// instantiated per ISA (attention_kernels_scalar.cpp, attention_kernels_avx2.cpp).
// Three passes over the sequence's positions: scores and max, exp and sum, weighted V.
#pragma once

#include <cmath>

#include "base/fp16.h"
#include "model/attention.h"

namespace rapide {

// Ops must provide: float dot(const float* q, const uint8_t* k_row, int d, KvType) and
// void axpy(float a, const uint8_t* v_row, float* out, int d, KvType).
template <typename Ops>
void attend_query_impl(const AttentionQuery& job) {
  const KvLayout& layout = job.kv->layout();
  const int d = layout.head_dim;
  const int block_size = layout.block_size;
  const size_t row_bytes = static_cast<size_t>(d) * layout.element_bytes();
  const size_t k_offset = layout.offset(job.layer, false, job.kv_head);
  const size_t v_offset = layout.offset(job.layer, true, job.kv_head);

  // With an f16 cache, llama.cpp multiplies f16 K by q rounded to f16, and f16 V by the
  // softmax probabilities rounded to f16; doing the same keeps greedy runs on its path.
  const bool f16_cache = layout.type == KvType::kF16;
  float q_rounded[kMaxHeadDim];
  const float* q = job.q;
  if (f16_cache) {
    for (int i = 0; i < d; ++i) q_rounded[i] = fp16_to_fp32(fp32_to_fp16(job.q[i]));
    q = q_rounded;
  }
  float max_score = -INFINITY;
  for (int start = 0; start < job.n_positions; start += block_size) {
    const uint8_t* k = job.kv->block_data(job.blocks[start / block_size]) + k_offset;
    const int count = std::min(block_size, job.n_positions - start);
    for (int t = 0; t < count; ++t) {
      const float s = Ops::dot(q, k + t * row_bytes, d, layout.type) * job.scale;
      job.scores[start + t] = s;
      max_score = std::max(max_score, s);
    }
  }
  float sum = 0.0f;
  for (int t = 0; t < job.n_positions; ++t) {
    const float e = std::exp(job.scores[t] - max_score);
    job.scores[t] = e;
    sum += e;
  }
  const float inv_sum = 1.0f / sum;
  for (int i = 0; i < d; ++i) job.out[i] = 0.0f;
  for (int start = 0; start < job.n_positions; start += block_size) {
    const uint8_t* v = job.kv->block_data(job.blocks[start / block_size]) + v_offset;
    const int count = std::min(block_size, job.n_positions - start);
    for (int t = 0; t < count; ++t) {
      float p = job.scores[start + t] * inv_sum;
      if (f16_cache) p = fp16_to_fp32(fp32_to_fp16(p));
      Ops::axpy(p, v + t * row_bytes, job.out, d, layout.type);
    }
  }
}

}  // namespace rapide
