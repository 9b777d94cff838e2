// The few numbers that describe a loaded model to a user: how many parameters, how many
// bytes on disk, and which tensor type holds most of its weights ("q8_0" for a Q8_0
// quantization, whose norms stay f32). `rapide inspect` prints them; `rapide serve` reports
// them in /v1/models.
#pragma once

#include <cstdint>
#include <string>

#include "formats/model_file.h"

namespace rapide {

struct ModelSummary {
  uint64_t parameters = 0;  // elements of every tensor
  uint64_t file_bytes = 0;  // the model file (or folder's files) on disk; 0 when unknown
  std::string weight_type;  // the type of the largest share of tensor bytes
};

ModelSummary summarize_model(const ModelFile& model);

// What one token position costs in an f16 KV cache, all layers, K and V (docs/kv-cache.md).
// Multi-head latent attention (deepseek2) caches one latent row of kv_lora_rank +
// mla_rope_dim values per layer, stored as K and again as V (model/mla_attention.h):
// bytes = 2 * n_layers * (kv_lora_rank + mla_rope_dim) * 2; `expanded` is then what
// per-head K and V would take, n_layers * n_heads * (key_length + value_length) * 2, as
// llama.cpp's snapshot caches them. Otherwise bytes = 2 * n_layers * n_kv_heads * head_dim * 2
// and expanded = bytes.
struct KvFootprint {
  uint64_t bytes_per_token = 0;
  uint64_t expanded_bytes_per_token = 0;
};
KvFootprint kv_footprint(const ModelConfig& config);

}  // namespace rapide
