// Multi-head latent attention (DeepSeek-V2/V3, GGUF architecture deepseek2), computed on the
// compressed latent: the KV store holds one row per position and layer, not per-head K/V.
//
// What llama.cpp's build_deepseek2 computes (its reference runs expand K and V per head), with
// xn the attention norm's output, per head h:
//   q      = attn_q_b(RMSNorm(attn_q_a xn, attn_q_a_norm))   (attn_q xn when q_lora_rank = 0)
//            each head: [q_nope (mla_nope_dim) ; q_pe (mla_rope_dim)]
//   c      = attn_kv_a_mqa xn = [kv_c (kv_lora_rank) ; k_pe (mla_rope_dim)]
//   kv_c   = RMSNorm(kv_c, attn_kv_a_norm)        (k_pe is not normalised)
//   attn_kv_b kv_c, each head: [k_nope = W_UK[h] kv_c (mla_nope_dim) ; v = W_UV[h] kv_c]
//   NORM rope (pairs 2i, 2i+1) on q_pe and on k_pe, which every head shares
//   score  = (q_nope . k_nope + q_pe . k_pe) / sqrt(mla_nope_dim + mla_rope_dim)
//   out[h] = sum softmax(score) v, then attn_output over the heads' mla_v_dim values each.
//
// Here W_UK and W_UV are absorbed: q_nope . (W_UK kv_c) = (W_UK^T q_nope) . kv_c and
// sum p (W_UV kv_c) = W_UV (sum p kv_c). So each position caches the latent row
//   [RMSNorm(kv_c) ; rope(k_pe)]            (kv_lora_rank + mla_rope_dim values)
// as the store's single KV head (KvLayout::for_model), stored as K and again as V (K's part
// is transposed, so the two copies cannot be one). Head h's query is
//   [W_UK[h]^T q_nope[h] ; rope(q_pe[h])]   (the same width)
// and n_heads such queries attend over one KV head with the usual kernels; the first
// kv_lora_rank values of each head's weighted sum of latent rows go through W_UV[h]. The
// same value as llama.cpp's up to rounding: the F16 cache rounds the latent row instead of
// the expanded k_nope and v (tests/golden/deepseek2_logits_test.cpp measures the gap).
//
// Per position and layer the cache holds 2 (K and V copies) x (kv_lora_rank + mla_rope_dim)
// values against 2 x n_heads x (nope + rope) for an expanded layout (docs/kv-cache.md).
// Speed: correct first. The per-head products (W_UK[h]^T, W_UV[h]) run one after another,
// 2 x n_heads small products a layer, each its own pool dispatch; DeepSeek-V3's 128 heads
// would want them batched. W_UK^T is kept in f32 (dequantized at load).
//
// Rope scaling as llama.cpp's build_deepseek2: linear or YaRN on the rope part, with its
// mscale^2 on the scores (YaRN is not checked against llama.cpp: the reference file has
// none). Not supported: per-frequency rope factors (LongRoPE, rope_freqs) and tensor
// parallelism (both refused).
#pragma once

#include <vector>

#include "base/thread_pool.h"
#include "formats/model_file.h"
#include "kernels/matmul.h"
#include "kv/kv_store.h"
#include "model/attention.h"
#include "model/batch.h"

namespace rapide {

struct MlaWeights {
  WeightMatrix q_a, q_b;  // q LoRA: dim -> q_lora_rank -> n_heads * (nope + rope)
  std::vector<float> q_a_norm;
  WeightMatrix q;     // the lite layout (q_lora_rank 0): dim -> n_heads * (nope + rope)
  WeightMatrix kv_a;  // attn_kv_a_mqa: dim -> kv_lora_rank + rope
  std::vector<float> kv_a_norm;
  // Per head: W_UK[h]^T (mla_nope_dim -> kv_lora_rank, converted to f32 and transposed at
  // load) and W_UV[h] (kv_lora_rank -> mla_v_dim, rows of attn_kv_b in the file's type).
  std::vector<WeightMatrix> uk_t, uv;
  WeightMatrix out;  // attn_output: n_heads * mla_v_dim -> dim

  bool empty() const { return kv_a.empty(); }
  // The first product of the block (the one that reads xn): q_a, or q in the lite layout.
  const WeightMatrix& q_in() const { return q_a.empty() ? q : q_a; }
  // Every matrix, for weight byte and parameter counts.
  std::vector<const WeightMatrix*> matrices() const;
};

// Layer `layer` of the file (its blk.N. tensors). Throws kUnsupported for rope factors.
MlaWeights load_mla_weights(const ModelFile& file, const ModelConfig& c, int layer, ActQuant act);

class MlaAttention {
 public:
  // xn: [n][dim] the normed inputs; out: [n][dim] attn_output's result (may alias xn).
  // Writes the batch's latent rows into `layer` of kv, then attends with `attention`,
  // which must have been planned for this batch with c.n_heads queries per token.
  // kv_layer is the store's layer (a pipeline stage's own index).
  void forward(const MlaWeights& w, const ModelConfig& c, int kv_layer, const Batch& batch,
               const float* xn, KvStore& kv, Attention& attention, float* out, ThreadPool& pool);

 private:
  // This batch's rope tables; returns the score scale (YaRN's mscale included).
  float prepare_rope(const ModelConfig& c, const Batch& batch);

  // Scratch, grown on demand.
  std::vector<float> q_lora_, q_, latent_, nope_, absorbed_, query_, context_, head_in_, head_out_,
      heads_v_, rope_cos_, rope_sin_;
};

}  // namespace rapide
