// Reference attention kernel: one query at a time, plain loops, f16 converted element by
// element. The SIMD kernels are tested against it.
#include <algorithm>
#include <cmath>

#include "base/fp16.h"
#include "kernels/attention.h"
#include "kernels/attention_scores.h"

namespace rapide {

namespace {

float load_element(const uint8_t* part, size_t index, KvType type) {
  if (type == KvType::kF32) return reinterpret_cast<const float*>(part)[index];
  return fp16_to_fp32(reinterpret_cast<const uint16_t*>(part)[index]);
}

}  // namespace

void attend_job_scalar(const AttentionJob& job) {
  const KvLayout& layout = job.kv->layout();
  const int d = layout.head_dim;
  const int block_size = layout.block_size;
  const bool f16_cache = layout.type == KvType::kF16;
  const size_t k_offset = layout.offset(job.layer, false, job.kv_head);
  const size_t v_offset = layout.offset(job.layer, true, job.kv_head);
  for (int j = 0; j < job.n_queries; ++j) {
    float q[kMaxHeadDim];
    for (int i = 0; i < d; ++i)
      q[i] = f16_cache ? fp16_to_fp32(fp32_to_fp16(job.q[j][i])) : job.q[j][i];
    float* scores = job.scores + job.scores_stride * j;
    const int n = job.n_positions[j];
    float max_score = -INFINITY;
    // Positions before a sliding window are not scored: shape_attention_scores masks them.
    const int unseen = job.window > 0 ? std::max(0, n - job.window) : 0;
    for (int pos = unseen; pos < n; ++pos) {
      const uint8_t* k = job.kv->block_data(job.query_blocks[j][pos / block_size]) + k_offset;
      const int slot = pos % block_size;
      float sum = 0.0f;
      for (int i = 0; i < d; ++i)
        sum += q[i] * load_element(k, layout.key_element(slot, i), layout.type);
      scores[pos] = sum * job.scale;
    }
    const int first = shape_attention_scores(scores, n, job.window, job.softcap);
    for (int pos = first; pos < n; ++pos) max_score = std::max(max_score, scores[pos]);
    float total = 0.0f;
    std::fill(scores, scores + first, 0.0f);
    for (int pos = first; pos < n; ++pos) {
      scores[pos] = std::exp(scores[pos] - max_score);
      total += scores[pos];
    }
    const float inv_total = 1.0f / total;
    float* out = job.out[j];
    std::fill(out, out + d, 0.0f);
    for (int pos = first; pos < n; ++pos) {
      float p = scores[pos] * inv_total;
      if (f16_cache) p = fp16_to_fp32(fp32_to_fp16(p));
      const uint8_t* v = job.kv->block_data(job.query_blocks[j][pos / block_size]) + v_offset;
      const int slot = pos % block_size;
      for (int i = 0; i < d; ++i)
        out[i] += p * load_element(v, layout.value_element(slot, i), layout.type);
    }
  }
}

}  // namespace rapide
