// Attention kernels: one job's softmax(q·K / sqrt(d)) · V over a paged KV cache, per ISA.
//
// Contract: the caller (model/attention.h plans the jobs over a batch and its block tables)
// hands a kernel one AttentionJob at a time: up to kMaxJobQueries queries of one KV head, each
// with its positions' block table. A kernel reads K/V through job.kv (the header-only
// kv/kv_store.h interface) and writes only job.out[j] and the job's scores scratch, whose
// rows (scores_stride floats) must cover max_positions rounded up to 16 lanes plus one more
// 16-lane tile, because the SIMD kernels store whole tiles. A query's result does not depend
// on the other queries of its job, and every SIMD kernel follows the scalar reference's
// arithmetic (tests/unit/model/attention_test.cpp compares them).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kv/kv_store.h"

namespace rapide {

// Largest head dimension the kernels support (Llama-family models use 64..256; DeepSeek's
// multi-head latent attention attends over a 576-wide latent row, kv_lora_rank 512 + rope
// 64: model/mla_attention.h).
constexpr int kMaxHeadDim = 576;
// Most queries one job can carry (a kernel may take fewer: AttentionKernel::max_queries).
constexpr int kMaxJobQueries = 12;

// One job handed to an ISA-specific kernel: queries of one KV head, from one sequence or
// from several whose block tables start with the same blocks (a prefix-cache hit shares
// them). Positions below shared_positions are the same K/V for every query and are read
// through `blocks`, once for all of them; query j's later positions through its own
// query_blocks[j]. A query's arithmetic is the same either way (batch invariance).
struct AttentionJob {
  int n_queries = 0;
  const float* q[kMaxJobQueries];               // head_dim values each (rotated, not yet scaled)
  float* out[kMaxJobQueries];                   // head_dim values each
  int n_positions[kMaxJobQueries];              // query j attends to positions [0, n_positions[j])
  int max_positions = 0;                        // the largest n_positions[j]
  const int32_t* blocks = nullptr;              // block table for positions [0, shared_positions)
  const int32_t* query_blocks[kMaxJobQueries];  // query j's own sequence's block table
  int shared_positions = 0;  // <= every n_positions[j]; = max_positions for one sequence
  KvStore* kv = nullptr;
  int layer = 0;
  int kv_head = 0;
  float scale = 1.0f;
  // Score shaping (attention_scores.h): soft-cap (0: none) and sliding window (0: none).
  // Query j sees positions [max(0, n_positions[j] - window), n_positions[j]).
  float softcap = 0.0f;
  int window = 0;
  // Scratch: kMaxJobQueries rows of scores_stride floats (scores, then probabilities).
  float* scores = nullptr;
  size_t scores_stride = 0;
};

// The kernels (attention_kernels_*.cpp). The f16 cache follows llama.cpp's arithmetic: q is
// rounded to f16 before the dot products with f16 keys, and the softmax probabilities are
// rounded to f16 before they weight the f16 values. With a q8_0 / q4_0 cache, q is quantized
// per group (kv_rows.h) for integer dot products with the key codes, and the probabilities
// times the values' scales are quantized per chunk of positions (attention_value_weights.h)
// for integer dot products with the value codes.
void attend_job_scalar(const AttentionJob& job);
void attend_job_avx2(const AttentionJob& job);    // head_dim % 8 == 0
void attend_job_avx512(const AttentionJob& job);  // head_dim % 16 == 0

struct AttentionKernel {
  void (*run)(const AttentionJob&) = nullptr;
  int max_queries = 1;
  const char* name = "";
};
// The fastest kernel this CPU (and RAPIDE_ISA) allows for this head dimension.
AttentionKernel select_attention_kernel(int head_dim);
AttentionKernel scalar_attention_kernel();

}  // namespace rapide
