// Attention over the paged KV store, model side: write the batch's new K/V rows, then for
// every token and head compute softmax(q·K / sqrt(d)) · V over that sequence's positions
// 0..pos.
//
// This file plans the work; the arithmetic is the kernels' (kernels/attention.h). Work is
// cut into jobs that share one sequence and one KV head: up to a few queries (the heads of
// a GQA group, times a few consecutive tokens of the sequence) read each tile of K and V
// once. Every query's arithmetic is done the same way whatever job it lands in, so a
// token's result never depends on what else is in the batch or on how its prompt was
// chunked.
#pragma once

#include <vector>

#include "base/thread_pool.h"
#include "kernels/attention.h"
#include "kv/kv_store.h"
#include "model/batch.h"

namespace rapide {

// Per-layer variations of the score computation (model_config.h): the scale (0: 1/sqrt(d)),
// a soft-cap and a sliding window (0: none).
struct AttentionScores {
  float scale = 0.0f;
  float softcap = 0.0f;
  int window = 0;
};

class Attention {
 public:
  // Stores k/v rows ([n][kv_dim] each) of the batch's tokens into their sequences' slots.
  static void write_kv(KvStore& kv, int layer, const Batch& batch, const float* k, const float* v);
  // The same for the batch's tokens [begin, end) only (tokens are written independently, so
  // disjoint ranges may run on different threads).
  static void write_kv(KvStore& kv, int layer, const Batch& batch, const float* k, const float* v,
                       int begin, int end);

  // q: [n][n_heads * head_dim] (already rotated); out: same shape. Plans, then runs the jobs.
  void attend(KvStore& kv, int layer, const Batch& batch, const float* q, int n_heads, float* out,
              ThreadPool& pool);

  // The same in two parts for a forward pass: the jobs depend only on the batch and its
  // sequences' block tables, which every layer shares, so plan() runs once per batch and
  // attend_planned() once per layer (the batch and tables must not change in between).
  void plan(KvStore& kv, const Batch& batch, int n_heads);
  void attend_planned(KvStore& kv, int layer, const Batch& batch, const float* q, int n_heads,
                      float* out, ThreadPool& pool, const AttentionScores& shape = {});

  // Tests pin a kernel; by default select_attention_kernel() decides on first use.
  void set_kernel(AttentionKernel kernel) { kernel_ = kernel; }
  // Jobs of the last plan that carry several sequences sharing a prefix.
  int shared_prefix_jobs() const;

 private:
  // A job before it is expanded: a run of tokens of one sequence and a range of heads, or
  // (n_members > 0) one decoding token of each of several sequences that share their
  // first shared_positions positions, with every query head of the KV head.
  struct JobSpec {
    int first_token;
    int n_tokens;
    int kv_head;
    int first_head;  // absolute query head index
    int n_heads;
    int first_member = 0;  // into members_
    int n_members = 0;
    int shared_positions = 0;
  };
  void plan_jobs(KvStore& kv, const Batch& batch, int n_heads, int n_kv_heads);
  // Groups single-token sequences (decodes) whose block tables share leading blocks.
  void plan_shared_prefix_jobs(KvStore& kv, const Batch& batch, int n_kv_heads, int group,
                               int per_job);

  AttentionKernel kernel_;
  std::vector<JobSpec> jobs_;  // reused across calls: no allocation once warm
  std::vector<int> members_;   // token indices of the grouped jobs' sequences
  std::vector<int> singles_;   // tokens that are alone in their segment (decodes)
  std::vector<float> scores_;  // per-thread scratch, grown on demand
};

}  // namespace rapide
