#include "model/attention.h"

#include <cmath>
#include <cstring>

#include "base/cpu_features.h"
#include "base/error.h"
#include "base/fp16.h"

namespace rapide {

void Attention::write_kv(KvStore& kv, int layer, const Batch& batch, const float* k,
                         const float* v) {
  const KvLayout& layout = kv.layout();
  const int head_dim = layout.head_dim;
  const int kv_dim = layout.n_kv_heads * head_dim;
  for (int i = 0; i < batch.size(); ++i) {
    const int pos = batch.positions[i];
    auto table = kv.block_table(batch.seq_ids[i]);
    const size_t block_index = static_cast<size_t>(pos / layout.block_size);
    if (pos < 0 || block_index >= table.size()) {
      fail(ErrorCode::kOutOfRange, "position {} of sequence {} is beyond its KV capacity ({})", pos,
           batch.seq_ids[i], table.size() * layout.block_size);
    }
    uint8_t* block = kv.block_data(table[block_index]);
    const int slot = pos % layout.block_size;
    for (int h = 0; h < layout.n_kv_heads; ++h) {
      const float* src_k = k + static_cast<size_t>(i) * kv_dim + h * head_dim;
      const float* src_v = v + static_cast<size_t>(i) * kv_dim + h * head_dim;
      uint8_t* dst_k = block + layout.offset(layer, false, h) +
                       static_cast<size_t>(slot) * head_dim * layout.element_bytes();
      uint8_t* dst_v = block + layout.offset(layer, true, h) +
                       static_cast<size_t>(slot) * head_dim * layout.element_bytes();
      if (layout.type == KvType::kF32) {
        std::memcpy(dst_k, src_k, head_dim * sizeof(float));
        std::memcpy(dst_v, src_v, head_dim * sizeof(float));
      } else {
        auto* hk = reinterpret_cast<uint16_t*>(dst_k);
        auto* hv = reinterpret_cast<uint16_t*>(dst_v);
        for (int d = 0; d < head_dim; ++d) {
          hk[d] = fp32_to_fp16(src_k[d]);
          hv[d] = fp32_to_fp16(src_v[d]);
        }
      }
    }
  }
}

void Attention::attend(KvStore& kv, int layer, const Batch& batch, const float* q, int n_heads,
                       float* out, ThreadPool& pool) {
  const KvLayout& layout = kv.layout();
  const int head_dim = layout.head_dim;
  const int group = n_heads / layout.n_kv_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  const int n = batch.size();

  int max_positions = 0;
  for (int i = 0; i < n; ++i) max_positions = std::max(max_positions, batch.positions[i] + 1);
  const size_t per_thread = static_cast<size_t>(max_positions + 15) / 16 * 16;
  if (scores_.size() < per_thread * pool.size()) scores_.resize(per_thread * pool.size());

  auto kernel = active_isa_level() >= IsaLevel::kAvx2 ? attend_query_avx2 : attend_query_scalar;
  const int64_t jobs = static_cast<int64_t>(n) * n_heads;
  // Waking the other threads costs microseconds: only worth it for enough dot products
  // (a tiny model's single decode step is cheaper done alone).
  int64_t work = 0;
  for (int i = 0; i < n; ++i) work += static_cast<int64_t>(batch.positions[i] + 1);
  work *= static_cast<int64_t>(n_heads) * head_dim;
  constexpr int64_t kMinParallelWork = 1 << 15;
  auto run_jobs = [&](int64_t begin, int64_t end, int thread) {
    float* scores = scores_.data() + per_thread * thread;
    for (int64_t job = begin; job < end; ++job) {
      const int i = static_cast<int>(job / n_heads);
      const int h = static_cast<int>(job % n_heads);
      AttentionQuery query;
      query.q = q + (static_cast<size_t>(i) * n_heads + h) * head_dim;
      query.out = out + (static_cast<size_t>(i) * n_heads + h) * head_dim;
      query.n_positions = batch.positions[i] + 1;
      query.blocks = kv.block_table(batch.seq_ids[i]).data();
      query.kv = &kv;
      query.layer = layer;
      query.kv_head = h / group;
      query.scale = scale;
      query.scores = scores;
      kernel(query);
    }
  };
  if (work < kMinParallelWork) {
    run_jobs(0, jobs, 0);
  } else {
    pool.parallel_for(jobs, 1, run_jobs);
  }
}

}  // namespace rapide
