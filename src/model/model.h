// A Llama-family decoder (Llama 1/2/3, Mistral, Mixtral, Qwen2, Qwen2-MoE, Phi-3, Gemma 2,
// DeepSeek-V2/V3, TinyStories...): one token's path from embedding to logits reads top to bottom in
// Model::forward. Architectures differ only through ModelConfig's block description (rope
// style, biases, tied head, fused tensors, activation, post-norms, soft-caps, sliding
// window, experts; formats/architecture.h); the speed is in src/kernels.
//
// Fused tensors (phi3's attn_qkv, its gate/up ffn_up) are split into row ranges at load, so
// the forward pass sees separate matrices. Mixture-of-experts layers route each token to its
// top-k experts and run every expert once per step over all the rows routed to it
// (model/moe_routing.h), so a batch reads each expert's weights at most once. DeepSeek's
// multi-head latent attention has its own block (model/mla_attention.h).
//
// LoRA adapters (lora/lora_adapter.h) added with add_lora() run per row: each token of a
// Batch names its adapter (or none), every base product runs once over all rows, and each
// adapted projection then adds its rows' low-rank updates adapter by adapter
// (lora/lora_rows.h), so one pass serves rows of several fine-tunes.
#pragma once

#include <array>
#include <memory>
#include <span>
#include <vector>

#include "base/thread_pool.h"
#include "formats/model_file.h"
#include "kernels/matmul.h"
#include "kv/kv_store.h"
#include "lora/lora_adapter.h"
#include "lora/lora_rows.h"
#include "model/attention.h"
#include "model/batch.h"
#include "model/linear_observer.h"
#include "model/mla_attention.h"
#include "model/pipeline_parallel.h"
#include "model/tensor_parallel.h"

namespace rapide {

struct LayerWeights {
  std::vector<float> attn_norm;       // empty without pre-norms (olmo2)
  std::vector<float> ffn_norm;        // empty without pre-norms or in a parallel block (cohere2)
  std::vector<float> q_norm, k_norm;  // config.qk_norm: [head_dim] per head, or [q]/[kv] whole
  WeightMatrix wq, wk, wv, wo;
  std::vector<float> bq, bk, bv;                     // empty unless config.qkv_bias
  WeightMatrix ffn_gate, ffn_up, ffn_down;           // dense FFN (split from ffn_up when fused)
  std::vector<float> post_attn_norm, post_ffn_norm;  // empty unless config.post_norms
  // Mixture of experts (config.n_experts > 0).
  WeightMatrix router;  // ffn_gate_inp: dim -> n_experts
  std::vector<WeightMatrix> expert_gate, expert_up, expert_down;
  std::vector<float> shared_gate_inp;  // qwen2moe: one gate value per token
  WeightMatrix shared_gate, shared_up, shared_down;
  std::vector<float> expert_bias;  // deepseek2 V3: exp_probs_b.bias, for the expert choice
  MlaWeights mla;                  // deepseek2 (config.mla()): in place of wq, wk, wv, wo
};

class Model {
 public:
  // Prepares every weight matrix (kernels may repack them). The ModelFile is kept alive.
  // `act` picks the activation side of quantized products (kernels/matmul.h).
  // With `tp` (which must outlive the model) only this rank's shard is prepared and every
  // forward pass runs with the other ranks (model/tensor_parallel.h); config() is then the
  // shard's (its heads, kv heads and FFN width), and only the leader's forward() returns
  // logits (a follower gets an empty span). With `pp` only this stage's layers are prepared
  // (model/pipeline_parallel.h) and config().n_layers counts them; only stage 0's forward()
  // returns logits. With both, each stage's layers are split over its tensor group and only
  // stage 0's tensor rank 0 returns logits.
  explicit Model(std::shared_ptr<const ModelFile> file, ActQuant act = ActQuant::kInt8,
                 TensorParallel* tp = nullptr, PipelineParallel* pp = nullptr);

  const ModelConfig& config() const { return config_; }
  TensorParallel* tensor_parallel() const { return tp_; }
  PipelineParallel* pipeline_parallel() const { return pp_; }
  // Pipeline parallelism: the model-wide index of this stage's first layer (0 otherwise).
  int first_layer() const { return first_layer_; }
  const ModelFile& file() const { return *file_; }

  // Runs every token of the batch through the network, storing their K/V, and returns the
  // logits of the tokens flagged needs_logits, in batch order: rows x vocab_size floats.
  // The span stays valid until the next forward(). Throws Error(kInvalidArgument) for a token
  // id outside the vocabulary and kOutOfRange for a position beyond the KV capacity.
  std::span<const float> forward(const Batch& batch, KvStore& kv, ThreadPool& pool);

  // Adds a LoRA adapter (loaded for this model's file: lora/lora_load.h) and returns its
  // index, what Batch::add's `adapter` names. Throws Error(kUnsupported) under tensor or
  // pipeline parallelism, for deepseek2's latent attention, or when the adapter adapts a
  // projection this model does not compute as a separate dense matrix (an expert FFN);
  // kInvalidArgument for another model's adapter or a name already taken. Not while a
  // forward pass runs: the adapter list is read without a lock (adapters are added before an
  // engine starts; loading and unloading under load is not supported yet).
  int add_lora(std::shared_ptr<const LoraAdapter> adapter);
  int lora_count() const { return static_cast<int>(loras_.size()); }
  const LoraAdapter& lora(int index) const { return *loras_.at(index); }
  // The index of the adapter named `name`, or -1.
  int find_lora(std::string_view name) const;

  // Calibration: every later forward() shows `observer` the inputs of the dense linear
  // layers (model/linear_observer.h); nullptr stops it. The observer must outlive its use.
  void set_linear_observer(LinearObserver* observer) { observer_ = observer; }

  // The same pass without the output head: every token's hidden state after the final norm
  // (what the head would read; embeddings pool these), rows x dim floats in batch order.
  // needs_logits is ignored. Valid until the next forward() or forward_hidden().
  std::span<const float> forward_hidden(const Batch& batch, KvStore& kv, ThreadPool& pool);

  // Bytes of all weight matrices: what a decode step of a dense model reads (for roofline
  // figures). A mixture-of-experts step reads only the experts its rows chose:
  // last_forward_weight_bytes().
  uint64_t weight_bytes() const { return weight_bytes_; }
  // Bytes of weights the last forward() read: the matrices every token uses, plus each
  // expert that at least one row was routed to, once (MoE rows are grouped by expert).
  uint64_t last_forward_weight_bytes() const { return last_forward_weight_bytes_; }
  // Expert FFN runs of the last forward(), over all layers (at most n_experts per layer).
  int last_forward_expert_runs() const { return last_forward_expert_runs_; }
  // Multiply-accumulates per token in the weight matrices (2x this = FLOPs per token).
  uint64_t matmul_parameters() const { return matmul_parameters_; }

 private:
  void ensure_scratch(int n_tokens, int n_logits);
  // kInvalidArgument for a token outside the vocabulary or an adapter index not added.
  void check_tokens(const Batch& batch) const;
  void run_layers(const Batch& batch, KvStore& kv, ThreadPool& pool);  // embedding to last layer
  void run_stage_layers(const Batch& batch, KvStore& kv, ThreadPool& pool);  // x_ through layers_
  void embed(const Batch& batch);
  // x_ of the batch's rows to the logits of the rows flagged needs_logits (empty on a
  // tensor-parallel follower), or to every row's final-norm hidden state.
  std::span<const float> head(const Batch& batch, ThreadPool& pool);
  std::span<const float> final_hidden(int n);
  std::span<const float> forward_pipelined(const Batch& batch, KvStore& kv, ThreadPool& pool,
                                           bool hidden_only);
  void attention_block(int layer, const Batch& batch, KvStore& kv, ThreadPool& pool);
  void ffn_block(int layer, int n, ThreadPool& pool);
  // xn_ [n][dim] -> xn_: the gated FFN of width `width`, dense or one expert's.
  // `layer` >= 0 names the dense FFN, for the observer and the LoRA adapters (experts pass -1:
  // not observed, not adapted).
  // `after`: the product that follows down's (WeightMatrix::stream_next), if known.
  // `input`: what `in` holds (kF16Exact: the caller rounded it for gate and up).
  void gated_ffn(const WeightMatrix& gate, const WeightMatrix& up, const WeightMatrix& down,
                 const float* in, int n, int width, float* out, ThreadPool& pool, int layer = -1,
                 std::span<const WeightMatrix* const> after = {},
                 WeightMatrix::Input input = WeightMatrix::Input::kF32);
  // Matrices applied to one input in one multiply_group (for WeightMatrix::stream_next).
  struct Products {
    std::array<const WeightMatrix*, 3> m{};
    size_t n = 0;
    std::span<const WeightMatrix* const> span() const { return {m.data(), n}; }
  };
  // The first product of `layer`'s attention (Q, K, V), of its FFN (a dense FFN's gate and
  // up, the router of experts) and the one after its FFN (the next layer's Q, K, V; the
  // output after the last).
  Products qkv_of(int layer) const;
  Products ffn_start_of(int layer) const;
  Products after_ffn_of(int layer) const;
  // How the op that produces the n rows of `ws`'s input hands them over: rounded to f16 in
  // its own pass over the rows (kF16Exact) when every product of `ws` rounds its input to f16
  // anyway (F16 weights), no observer wants the unrounded values and the product is batched;
  // the products then skip their own rounding pass, the same bits. A 128-token F16 prefill
  // spent 3.7 % of its samples in that pass; with it in the producer, synth100m F16 (2
  // threads, alternated in one process) prefill 2,215-2,234 -> 2,259-2,293 tok/s (best of
  // 30), the 32-row step 20.93 -> 20.61 ms. At <= kStreamingRows rows each thread converts x
  // into its own cache anyway, and the producer's pass measured 0.2-0.7 % slower.
  // LoRA rows read the unrounded values, as llama.cpp's F32 adapter products do: with any in
  // the batch, the producer leaves them as they are.
  WeightMatrix::Input input_for(std::span<const WeightMatrix* const> ws, int n) const {
    return n > WeightMatrix::kStreamingRows && observer_ == nullptr && lora_rows_.empty() &&
                   WeightMatrix::all_round_input_to_f16(ws)
               ? WeightMatrix::Input::kF16Exact
               : WeightMatrix::Input::kF32;
  }
  void observe(int layer, LinearInput input, const float* x, int n, int64_t cols) const {
    if (observer_ != nullptr) observer_->observe(layer, input, x, n, cols);
  }
  void moe_ffn(int layer, int n, ThreadPool& pool);
  // y += the low-rank updates of `target` of this stage's `layer` for the rows whose adapter
  // adapts it (x: that product's input rows).
  void apply_lora(int layer, LoraTarget target, const float* x, float* y, ThreadPool& pool) {
    if (!lora_rows_.empty()) lora_rows_.apply(loras_, first_layer_ + layer, target, x, y, pool);
  }
  // The base matrix `target` of `layer`, or nullptr when the layer has none (experts).
  const WeightMatrix* lora_base(int layer, LoraTarget target) const;
  // deepseek2: multi-head latent attention (model/mla_attention.h), x_ in, xn_ out.
  void mla_attention_block(int layer, const Batch& batch, KvStore& kv, ThreadPool& pool);
  // Whether `layer` (of this stage) runs routed experts: deepseek2's leading layers do not.
  bool moe_layer(int layer) const {
    return config_.n_experts > 0 && first_layer_ + layer >= config_.leading_dense_layers;
  }
  // Tensor parallelism: the sum of every rank's partial rows x dim floats, in place.
  void reduce_partial(float* rows, int n) {
    if (tp_ != nullptr) tp_->all_reduce_sum(rows, static_cast<size_t>(n) * config_.dim);
  }
  void prepare_rope(const Batch& batch);  // this batch's rotation angles
  // Rotates q/k of tokens [begin, end) as `layer` (this stage's index) does.
  void apply_rope(int layer, int begin, int end);
  // The configured norm (RMSNorm or LayerNorm) of one row of dim values.
  void norm_row(const float* x, const std::vector<float>& w, float* out) const;
  // q/k normalisation of tokens [begin, end) after their projections (config.qk_norm).
  void qk_norm_rows(const LayerWeights& w, int begin, int end);

 public:
  // LongRoPE picks its short or long factor set by the longest context a sequence may reach
  // (llama.cpp: n_ctx_per_seq > original context -> long). The engine tells its limit; until
  // then the trained context decides.
  void set_serving_context(int max_context);

 private:
  std::shared_ptr<const ModelFile> file_;
  ModelConfig config_;
  WeightMatrix token_embedding_;
  std::vector<LayerWeights> layers_;
  std::vector<float> output_norm_;
  WeightMatrix output_;
  uint64_t weight_bytes_ = 0;
  uint64_t matmul_parameters_ = 0;
  uint64_t all_expert_bytes_ = 0;  // of weight_bytes_
  uint64_t last_forward_weight_bytes_ = 0;
  int last_forward_expert_runs_ = 0;
  Attention attention_;
  MlaAttention mla_;
  LinearObserver* observer_ = nullptr;
  std::vector<std::shared_ptr<const LoraAdapter>> loras_;
  LoraRows lora_rows_;  // the current pass's rows, grouped by adapter
  TensorParallel* tp_ = nullptr;
  PipelineParallel* pp_ = nullptr;
  int first_layer_ = 0;     // pipeline stage: model-wide index of layers_[0]
  bool has_input_ = true;   // holds the token embedding (pipeline stage 0)
  bool has_output_ = true;  // holds the final norm and the output head (last stage)
  SliceRange vocab_slice_;  // token_embd / output rows this rank holds (all without tp_)

  // Activations for the current batch, grown on demand (no allocation in steady state).
  int scratch_tokens_ = 0;
  int scratch_logits_ = 0;
  std::vector<float> x_, xn_, q_, k_, v_, att_, gate_, up_, rope_cos_, rope_sin_;
  std::vector<float> rope_local_cos_, rope_local_sin_;  // gemma3's windowed layers
  std::vector<float> block_in_;                         // a parallel block's normed input
  std::vector<float> rope_factors_;                     // per-frequency divisors (or empty)
  std::vector<float> logits_in_, logits_, logits_slice_;
  std::vector<float> hidden_;  // forward_hidden()'s rows
  // MoE scratch: router probabilities, each token's chosen experts and weights, the rows
  // gathered for one expert, and each (token, slot)'s weighted expert output.
  std::vector<float> router_probs_, expert_weight_, gathered_, expert_out_, slot_out_, shared_out_;
  std::vector<int> expert_id_, expert_rows_;
};

}  // namespace rapide
