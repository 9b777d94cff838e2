// The hyper-parameters of a Llama-family decoder, whatever file format they came from.
// Architectures differ as data here, not as code: the block description below (rope style,
// biases, tied head, fused tensors, activation, extra norms, soft-caps, sliding window,
// experts) is all Model::forward consults. formats/architecture.h fills it per architecture.
#pragma once

#include <cstdint>
#include <string>

namespace rapide {

enum class RopeStyle {
  kNormal,  // rotate adjacent pairs (x[2i], x[2i+1]) — llama.cpp LLAMA_ROPE_TYPE_NORM, llama2.c
  kNeox,    // rotate halves (x[i], x[i + d/2]) — Qwen2, GPT-NeoX
};

enum class FfnActivation {
  kSilu,      // SwiGLU: silu(gate) * up (llama, qwen2, phi3, MoE experts)
  kGeluTanh,  // GeGLU with GELU's tanh form (gemma, gemma2, gemma3)
};

// Which layers mask keys outside ModelConfig::sliding_window.
enum class WindowLayers {
  kNone,
  kAll,      // phi3: every layer
  kPattern,  // layer % window_period < window_period - 1 is windowed ("local"), the last
             // layer of each period global: gemma2 (period 2: even layers local), cohere2
             // (4), gemma3 (6)
};

// How rotary angles are stretched beyond the trained context (llama.cpp's rope.scaling.type).
enum class RopeScaling {
  kNone,
  kLinear,    // position / rope_scale
  kYarn,      // NTK-by-parts interpolation with an attention factor (Qwen2.5 long, DeepSeek)
  kLongRope,  // Phi-3 128k: per-frequency divisors (rope_factors_short/long.weight), chosen by
              // the serving context, and an attention factor
};

enum class NormKind {
  kRms,    // x / sqrt(mean(x^2) + eps) * w
  kLayer,  // (x - mean) / sqrt(var + eps) * w, no bias (cohere2)
};

// Normalisation of the query and key vectors after their projections, before rope.
enum class QkNorm {
  kNone,
  kPerHead,  // qwen3, gemma3: RMSNorm over each head's head_dim values (attn_q_norm [head_dim])
  kWhole,    // olmo2: RMSNorm over all heads' q (and k) values together ([n_heads * head_dim])
};

// How a mixture-of-experts router turns its logits into expert scores.
enum class ExpertGating {
  kSoftmax,  // Mixtral, Qwen2-MoE, Qwen3-MoE, DeepSeek-V2
  kSigmoid,  // DeepSeek-V3: independent sigmoids (expert_gating_func = 2)
};

struct ModelConfig {
  std::string architecture = "llama";  // GGUF general.architecture: "llama", "qwen2", ...
  std::string name;                    // human label (general.name or file stem)
  int dim = 0;                         // embedding width
  int n_layers = 0;
  int n_heads = 0;
  int n_kv_heads = 0;  // grouped-query attention: n_heads % n_kv_heads == 0
  int head_dim = 0;    // usually dim / n_heads
  int ffn_dim = 0;     // SwiGLU hidden width
  int vocab_size = 0;
  int max_context = 0;  // trained context length
  float rms_eps = 1e-5f;
  float rope_theta = 10000.0f;
  float rope_scale = 1.0f;  // linear position scaling: position / rope_scale
  RopeStyle rope_style = RopeStyle::kNormal;
  // Rotary dimensions per head (rope.dimension_count); 0: all of head_dim. Partial rotary
  // rotates the first rope_dim dimensions and leaves the rest as they are.
  int rope_dim = 0;
  // Llama 3.1+: the file's rope_freqs.weight (rope_dim / 2 floats) divides each frequency's
  // angle (llama.cpp's build_rope_factors). Hugging Face folders get the tensor computed
  // from rope_scaling {rope_type: llama3} at load, as llama.cpp's converter writes it.
  bool rope_freq_factors = false;
  RopeScaling rope_scaling = RopeScaling::kNone;
  int rope_orig_context = 0;      // yarn / longrope: the context the model was trained at
  float yarn_ext_factor = 1.0f;   // yarn: mix of extrapolated and interpolated angles
  float yarn_attn_factor = 1.0f;  // yarn / longrope: extra scale of the rotated values
  float yarn_beta_fast = 32.0f;   // yarn: correction range, in rotations
  float yarn_beta_slow = 1.0f;
  float yarn_log_multiplier = 0.0f;  // DeepSeek: mscale = 1 + log_mul * ln(1 / freq_scale)
  // gemma3: windowed (local) layers rotate with this base and without scaling; 0: the global
  // base and scaling everywhere.
  float rope_theta_local = 0.0f;
  bool rope_on_global_layers = true;  // cohere2: the global layers have no rope at all
  bool tied_embeddings = false;       // output head reuses token_embd.weight
  bool qkv_bias = false;              // Qwen2: attn_q/k/v have biases

  // Block description (defaults: a plain llama block).
  bool fused_qkv = false;      // phi3: one attn_qkv matrix, rows [Q; K; V]
  bool fused_gate_up = false;  // phi3: ffn_up holds rows [gate; up], no ffn_gate
  FfnActivation activation = FfnActivation::kSilu;
  bool post_norms = false;         // gemma2: post_attention_norm / post_ffw_norm before each add
  float embedding_scale = 0.0f;    // gemma2: embeddings times sqrt(dim); 0: none
  float attn_softcap = 0.0f;       // gemma2: scores -> cap * tanh(scores / cap); 0: none
  float final_softcap = 0.0f;      // gemma2: logits -> cap * tanh(logits / cap); 0: none
  float query_scale = 0.0f;        // attention scale; 0: 1 / sqrt(head_dim)
  bool scale_query_first = false;  // phi3, gemma2: Q times query_scale before the (f16) dot
                                   // products, as llama.cpp does for them; llama scales scores
  int sliding_window = 0;          // keys visible from query i: i - j < window (0: unlimited)
  WindowLayers window_layers = WindowLayers::kNone;
  int window_period = 0;  // WindowLayers::kPattern's period

  // Norms and the residual stream.
  NormKind norm_kind = NormKind::kRms;
  bool pre_norms = true;  // olmo2: no attn_norm / ffn_norm, only the post-norms
  QkNorm qk_norm = QkNorm::kNone;
  bool parallel_block = false;  // cohere2: x + attention(n(x)) + ffn(n(x)), one norm
  float residual_scale = 1.0f;  // granite: x + residual_scale * block(x)
  float logit_scale = 1.0f;     // logits times this (cohere2 0.25; granite 1 / logit_scale)

  // Mixture of experts (n_experts > 0): ffn_gate_inp routes each token to n_experts_used of
  // the stacked ffn_{gate,up,down}_exps experts of width expert_ffn_dim.
  int n_experts = 0;
  int n_experts_used = 0;
  int expert_ffn_dim = 0;
  bool normalize_expert_weights = true;  // Mixtral: top-k weights rescaled to sum to 1
  int shared_expert_ffn_dim = 0;         // qwen2moe: a sigmoid-gated shared expert (0: none)
  bool shared_expert_gated = true;       // false: deepseek2's shared experts, always on
  ExpertGating expert_gating = ExpertGating::kSoftmax;
  bool expert_selection_bias = false;  // deepseek2 V3: exp_probs_b.bias added for the top-k
                                       // choice only, not to the weights
  float expert_weights_scale = 1.0f;   // deepseek2: routed weights times this
  int leading_dense_layers = 0;        // deepseek2: the first layers have a dense FFN

  // Multi-head latent attention (deepseek2; kv_lora_rank > 0). Q = q_b(norm(q_a(x))) (or
  // attn_q when q_lora_rank is 0); each head's mla_nope_dim + mla_rope_dim values. The cache
  // holds one latent row per position: norm(kv_c) (kv_lora_rank) and the shared rotated
  // k_pe (mla_rope_dim), not the expanded per-head K/V.
  int q_lora_rank = 0;
  int kv_lora_rank = 0;
  int mla_nope_dim = 0;  // qk_nope_head_dim
  int mla_rope_dim = 0;  // qk_rope_head_dim
  int mla_v_dim = 0;     // v_head_dim

  int64_t kv_dim() const { return static_cast<int64_t>(n_kv_heads) * head_dim; }
  int64_t q_dim() const { return static_cast<int64_t>(n_heads) * head_dim; }
  bool windowed(int layer) const {
    return sliding_window > 0 && (window_layers == WindowLayers::kAll ||
                                  (window_layers == WindowLayers::kPattern && window_period > 0 &&
                                   layer % window_period < window_period - 1));
  }
  int rotary_dims() const { return rope_dim > 0 ? rope_dim : head_dim; }
  bool mla() const { return kv_lora_rank > 0; }
  // The window every layer attends through (Phi-3, a windowed llama): KV older than it is
  // read by no layer. 0 when some layer sees the whole context (gemma2's odd layers).
  int every_layer_window() const {
    return window_layers == WindowLayers::kAll ? sliding_window : 0;
  }
};

}  // namespace rapide
