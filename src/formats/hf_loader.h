// Hugging Face model folders: config.json (the architectures hf_architectures() lists),
// model.safetensors or a sharded model.safetensors.index.json, tokenizer.json and
// tokenizer_config.json.
//
// Tensors are renamed to GGUF names and kept as views into the safetensors mappings
// (F32/F16/BF16 as stored), except where llama.cpp's convert_hf_to_gguf.py changes them on
// the way to GGUF. The loader makes the same change, into a copy owned by ModelFile::storage,
// so that a folder and its GGUF conversion compute the same thing:
//   * Llama, Mistral and Mixtral Q and K projections: Hugging Face orders each head's rows for
//     rotate-half RoPE, GGUF llama for interleaved pairs, so their rows are permuted exactly as
//     the converter's `permute` does. Qwen2, Qwen2-MoE, Phi-3 and Gemma 2 keep NeoX
//     (rotate-half) RoPE and are not permuted.
//   * Gemma 2 norms: Hugging Face's Gemma RMSNorm multiplies by (1 + w), GGUF stores 1 + w.
//     Every norm weight gets 1 added, in F32 whatever its stored type (the copy is F32).
//   * Mixture-of-experts FFNs (Mixtral, Qwen2-MoE): one matrix per expert becomes one 3-D
//     tensor per layer, experts stacked in index order ([n_experts][rows][cols] row-major,
//     GGUF shape {cols, rows, n_experts}). Every expert must be there, all of one dtype and
//     shape.
// Qwen2-MoE's shared_expert_gate, a [1, dim] matrix, stays {dim, 1} as in a converted GGUF;
// check_model reads trailing dimensions of 1 as absent, like llama.cpp.
#pragma once

#include <cstdint>
#include <string>

#include "formats/model_file.h"

namespace rapide {

ModelFile load_hf(const std::string& dir);

// The config.json `architectures` names load_hf accepts, comma-separated (for messages).
const char* hf_architectures();

// config.json text -> ModelConfig (tied_embeddings and qkv_bias are settled from the
// tensors by load_hf). A key the config leaves out takes the default of its transformers
// config class, as transformers would. kUnsupported for other architectures, non-linear
// rope scaling and variants rapide does not compute (another activation, another window
// pattern, dense layers between MoE layers).
ModelConfig config_from_hf_json(const std::string& config_json, const std::string& name);

// Where a Hugging Face tensor goes.
struct HfTensorTarget {
  std::string name;  // GGUF name; "" for tensors that carry nothing (rotary inv_freq)
  int expert = -1;   // >= 0: this expert's slice of the stacked 3-D tensor `name`
};

// GGUF target of a Hugging Face tensor of a model of GGUF architecture `architecture`
// ("model.layers.3.self_attn.q_proj.weight" -> "blk.3.attn_q.weight"). The architecture
// matters for Gemma 2, whose post_attention_layernorm follows attention (post_attention_norm)
// where Llama's precedes the FFN (ffn_norm). kUnsupported for names outside the Llama,
// Mixtral, Qwen2, Qwen2-MoE, Phi-3 and Gemma 2 layouts.
HfTensorTarget gguf_target_for_hf(const std::string& hf_name, const std::string& architecture,
                                  const std::string& file);

// How many head groups permute_rope_rows takes for the Hugging Face tensor that becomes GGUF
// tensor `gguf_name` in a model of config `c`: the Llama Q (n_heads) and K (n_kv_heads)
// weights and biases (the first bullet above); 0 for every tensor the converter keeps as is.
int hf_rope_permute_heads(const ModelConfig& c, const std::string& gguf_name);

// llama.cpp's permute(): within each of n_heads groups of rows, row (s * half + i) moves to
// row (2 * i + s) for s in {0, 1}, i < half. `rows` rows of `row_bytes` bytes each.
void permute_rope_rows(const uint8_t* in, uint8_t* out, int64_t rows, int64_t row_bytes,
                       int n_heads);

}  // namespace rapide
