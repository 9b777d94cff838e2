// The hyper-parameters of a Llama-family decoder, whatever file format they came from.
// Architectures differ as data here (rope style, biases, tied head), not as code.
#pragma once

#include <cstdint>
#include <string>

namespace rapide {

enum class RopeStyle {
  kNormal,  // rotate adjacent pairs (x[2i], x[2i+1]) — llama.cpp LLAMA_ROPE_TYPE_NORM, llama2.c
  kNeox,    // rotate halves (x[i], x[i + d/2]) — Qwen2, GPT-NeoX
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

  int64_t kv_dim() const { return static_cast<int64_t>(n_kv_heads) * head_dim; }
  int64_t q_dim() const { return static_cast<int64_t>(n_heads) * head_dim; }
};

}  // namespace rapide
