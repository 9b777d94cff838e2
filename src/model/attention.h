// Attention over the paged KV store: write the batch's new K/V rows, then for every
// token and head compute softmax(q·K / sqrt(d)) · V over that sequence's positions
// 0..pos. Each query reads its own sequence's blocks in position order, so a token's
// result never depends on what else is in the batch.
#pragma once

#include <vector>

#include "base/thread_pool.h"
#include "model/batch.h"
#include "model/kv_store.h"

namespace rapide {

// Largest head dimension the kernels support (Llama-family models use 64..256).
constexpr int kMaxHeadDim = 512;

// One query row's job, handed to the ISA-specific kernel.
struct AttentionQuery {
  const float* q;           // head_dim values
  float* out;               // head_dim values
  int n_positions;          // attend to positions [0, n_positions)
  const int32_t* blocks;    // the sequence's block table
  KvStore* kv;
  int layer;
  int kv_head;
  float scale;
  float* scores;            // scratch, >= n_positions floats
};

// Kernels (attention_kernels_*.cpp): one query, one head, K/V in f16 or f32.
void attend_query_scalar(const AttentionQuery& job);
void attend_query_avx2(const AttentionQuery& job);

class Attention {
 public:
  // Stores k/v rows ([n][kv_dim] each) of the batch's tokens into their sequences' slots.
  static void write_kv(KvStore& kv, int layer, const Batch& batch, const float* k, const float* v);

  // q: [n][n_heads * head_dim] (already rotated); out: same shape.
  void attend(KvStore& kv, int layer, const Batch& batch, const float* q, int n_heads, float* out,
              ThreadPool& pool);

 private:
  std::vector<float> scores_;  // per-thread scratch, grown on demand
};

}  // namespace rapide
