// Reference attention kernel: one query at a time, plain loops, f16 converted element by
// element. The SIMD kernels are tested against it.
//
// Quantized caches (q8_0 / q4_0): the query is quantized per group (kv_rows.h) and each
// score is, over the groups g in order,
//     acc = fma(q.d[g] * key_scale[g], float(sum_i q_i * code_i - q.offset_sum[g]), acc)
// with the integer sum exact; the SIMD kernels compute the same integers and the same float
// operations in the same order. P·V is integer too: the probabilities times the values'
// scales are quantized per chunk of positions (attention_value_weights.h) and multiply the
// value codes.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "base/fp16.h"
#include "kernels/attention.h"
#include "kernels/attention_scores.h"
#include "kernels/attention_value_weights.h"
#include "kernels/kv_rows.h"

namespace rapide {

namespace {

float load_element(const uint8_t* part, size_t index, KvType type) {
  if (type == KvType::kF32) return reinterpret_cast<const float*>(part)[index];
  return fp16_to_fp32(reinterpret_cast<const uint16_t*>(part)[index]);
}

float load_scale(const uint8_t* part, size_t byte) {
  uint16_t h;
  std::memcpy(&h, part + byte, sizeof(h));
  return fp16_to_fp32(h);
}

// q·k (unscaled) of the query against the key at `slot` of part `k`.
float key_dot(const KvLayout& layout, const uint8_t* k, int slot, const float* q,
              const QuantizedQuery& qq) {
  const int d = layout.head_dim;
  if (!layout.quantized()) {
    float sum = 0.0f;
    for (int i = 0; i < d; ++i)
      sum += q[i] * load_element(k, layout.key_element(slot, i), layout.type);
    return sum;
  }
  const int group = layout.group_size();
  float acc = 0.0f;
  for (int g = 0; g < layout.n_groups(); ++g) {
    int32_t dot = 0;
    for (int i = g * group; i < (g + 1) * group; ++i) {
      dot +=
          qq.q[i] * kv_code(k, layout.key_code_byte(slot, i), layout.key_code_high(i), layout.type);
    }
    const float scale = qq.d[g] * load_scale(k, layout.key_scale_byte(slot, g));
    acc = std::fma(scale, static_cast<float>(dot - qq.offset_sum[g]), acc);
  }
  return acc;
}

// out += the probabilities p[0, count) times the values at positions [start, start + count)
// (one chunk, attention_value_weights.h), whose V parts `part(pos)` returns (with the slot).
template <typename Part>
void weigh_value_chunk(const KvLayout& layout, int start, int count, const Part& part,
                       const float* p, float* out) {
  const int group = layout.group_size();
  const bool q4 = layout.type == KvType::kQ4_0;
  for (int g = 0; g < layout.n_groups(); ++g) {
    float w[kValueChunk];
    float max_weight = 0.0f;
    for (int t = 0; t < count; ++t) {
      const auto [v, slot] = part(start + t);
      w[t] = p[t] * load_scale(v, layout.value_scale_byte(slot, g));
      max_weight = std::max(max_weight, std::fabs(w[t]));
    }
    const ValueWeightScale scale = value_weight_scale(max_weight);
    int8_t wq[kValueChunk];
    int32_t weight_sum = 0;
    for (int t = 0; t < count; ++t) weight_sum += wq[t] = value_weight_code(w[t], scale.inverse);
    const int32_t offset_sum = q4 ? layout.code_offset() * weight_sum : 0;
    for (int i = g * group; i < (g + 1) * group; ++i) {
      int32_t dot = 0;
      for (int t = 0; t < count; ++t) {
        const auto [v, slot] = part(start + t);
        const int code =
            kv_code(v, layout.value_code_byte(slot, i), layout.value_code_high(i), layout.type);
        dot += wq[t] * (q4 ? code : code - layout.code_offset());
      }
      out[i] = std::fma(scale.step, static_cast<float>(dot - offset_sum), out[i]);
    }
  }
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
    QuantizedQuery qq;
    if (layout.quantized()) quantize_query(layout, job.q[j], qq);
    float* scores = job.scores + job.scores_stride * j;
    const int n = job.n_positions[j];
    float max_score = -INFINITY;
    // Positions before a sliding window are not scored: shape_attention_scores masks them.
    const int unseen = job.window > 0 ? std::max(0, n - job.window) : 0;
    for (int pos = unseen; pos < n; ++pos) {
      const uint8_t* k = job.kv->block_data(job.query_blocks[j][pos / block_size]) + k_offset;
      scores[pos] = key_dot(layout, k, pos % block_size, q, qq) * job.scale;
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
    if (layout.quantized()) {
      for (int pos = first; pos < n; ++pos) scores[pos] *= inv_total;
      // Chunks from the first one the query sees (earlier ones weigh 0).
      auto part = [&](int pos) {
        const uint8_t* block = job.kv->block_data(job.query_blocks[j][pos / block_size]);
        return std::pair{block + v_offset, pos % block_size};
      };
      for (int start = value_chunk_start(first, block_size); start < n;) {
        const int end = std::min(n, value_chunk_end(start, block_size));
        weigh_value_chunk(layout, start, end - start, part, scores + start, out);
        start = end;
      }
      continue;
    }
    float row[kMaxHeadDim];
    for (int pos = first; pos < n; ++pos) {
      float p = scores[pos] * inv_total;
      if (f16_cache) p = fp16_to_fp32(fp32_to_fp16(p));
      const uint8_t* v = job.kv->block_data(job.query_blocks[j][pos / block_size]) + v_offset;
      load_kv_row(layout, v, true, pos % block_size, row);
      for (int i = 0; i < d; ++i) out[i] += p * row[i];
    }
  }
}

}  // namespace rapide
