// Hugging Face model folders: config.json (LlamaForCausalLM, MistralForCausalLM,
// Qwen2ForCausalLM), model.safetensors or a sharded model.safetensors.index.json,
// tokenizer.json and tokenizer_config.json.
//
// Tensors are renamed to GGUF names and kept as views into the safetensors mappings
// (F32/F16/BF16 as stored), except Llama's Q and K projections: Hugging Face orders each
// head's rows for rotate-half RoPE, GGUF llama for interleaved pairs, so their rows are
// permuted into a copy exactly as llama.cpp's convert_hf_to_gguf.py `permute` does.
// Qwen2 keeps NeoX (rotate-half) RoPE and is not permuted.
#pragma once

#include <cstdint>
#include <string>

#include "formats/model_file.h"

namespace rapide {

ModelFile load_hf(const std::string& dir);

// config.json text -> ModelConfig (tied_embeddings and qkv_bias are settled from the
// tensors by load_hf). kUnsupported for other architectures and non-linear rope scaling.
ModelConfig config_from_hf_json(const std::string& config_json, const std::string& name);

// GGUF name of a Hugging Face tensor ("model.layers.3.self_attn.q_proj.weight" ->
// "blk.3.attn_q.weight"); "" for tensors that carry nothing (rotary inv_freq).
// kUnsupported for names outside the Llama/Qwen2 layout.
std::string gguf_name_for_hf(const std::string& hf_name, const std::string& file);

// llama.cpp's permute(): within each of n_heads groups of rows, row (s * half + i) moves to
// row (2 * i + s) for s in {0, 1}, i < half. `rows` rows of `row_bytes` bytes each.
void permute_rope_rows(const uint8_t* in, uint8_t* out, int64_t rows, int64_t row_bytes,
                       int n_heads);

}  // namespace rapide
