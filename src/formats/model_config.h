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
  kGeluTanh,  // GeGLU with GELU's tanh form (gemma2)
};

// Which layers mask keys outside ModelConfig::sliding_window.
enum class WindowLayers {
  kNone,
  kAll,   // phi3: every layer
  kEven,  // gemma2: layers 0, 2, 4, ...; odd layers are fully causal
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
  bool tied_embeddings = false;  // output head reuses token_embd.weight
  bool qkv_bias = false;         // Qwen2: attn_q/k/v have biases

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

  // Mixture of experts (n_experts > 0): ffn_gate_inp routes each token to n_experts_used of
  // the stacked ffn_{gate,up,down}_exps experts of width expert_ffn_dim.
  int n_experts = 0;
  int n_experts_used = 0;
  int expert_ffn_dim = 0;
  bool normalize_expert_weights = true;  // Mixtral: top-k weights rescaled to sum to 1
  int shared_expert_ffn_dim = 0;         // qwen2moe: a sigmoid-gated shared expert (0: none)

  int64_t kv_dim() const { return static_cast<int64_t>(n_kv_heads) * head_dim; }
  int64_t q_dim() const { return static_cast<int64_t>(n_heads) * head_dim; }
  bool windowed(int layer) const {
    return sliding_window > 0 && (window_layers == WindowLayers::kAll ||
                                  (window_layers == WindowLayers::kEven && layer % 2 == 0));
  }
  // The window every layer attends through (Phi-3, a windowed llama): KV older than it is
  // read by no layer. 0 when some layer sees the whole context (gemma2's odd layers).
  int every_layer_window() const {
    return window_layers == WindowLayers::kAll ? sliding_window : 0;
  }
};

}  // namespace rapide
