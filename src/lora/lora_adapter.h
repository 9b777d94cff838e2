// A LoRA adapter as the forward pass uses it: for some projections of some layers, a low-rank
// update y = W x + scale * B (A x), with A of rank x in and B of out x rank, prepared as
// WeightMatrix objects so the update runs on the same kernels (and the same numerics) as the
// base products. How adapters are read from files: lora/lora_load.h; how a batch's rows
// of several adapters are multiplied: lora/lora_rows.h.
//
// The adapted projections are the dense ones every Llama-family block has as separate
// matrices: attn_q, attn_k, attn_v, attn_output, ffn_gate, ffn_up, ffn_down. A target's
// matrices are in GGUF's orientation and row order (ggml shape [in, rank] for A, [rank, out]
// for B; Q/K rows in the base model's RoPE layout), whatever file they came from.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/matmul.h"

namespace rapide {

enum class LoraTarget : int { kQ, kK, kV, kOutput, kGate, kUp, kDown };
inline constexpr int kLoraTargetCount = 7;

// The GGUF name of a target's base tensor within blk.N ("attn_q", ..., "ffn_down").
const char* lora_target_name(LoraTarget target);
// The target a GGUF base name (e.g. "attn_output") is, or nullopt.
std::optional<LoraTarget> lora_target_from_name(std::string_view name);
// "attn_q, attn_k, ..., ffn_down" (for messages).
const char* lora_target_names();

// llama.cpp's rule (llama-adapter.h get_scale): user_scale * alpha / rank, and the user's scale
// alone when alpha is 0 (a GGUF adapter without adapter.lora.alpha). PEFT's rsLoRA divides by
// sqrt(rank) instead. Computed in float in this order, so that the GGUF and PEFT forms of one
// adapter get the same bits.
float lora_scale(float user_scale, float alpha, int64_t rank, bool rslora);

// One adapted projection.
struct LoraWeights {
  WeightMatrix a;  // rank rows of `in` columns
  WeightMatrix b;  // `out` rows of rank columns
  float scale = 0.0f;
};

class LoraAdapter {
 public:
  LoraAdapter(std::string name, std::string path, std::string format, int n_layers,
              float user_scale);

  const std::string& name() const { return name_; }
  const std::string& path() const { return path_; }
  const std::string& format() const { return format_; }  // "gguf" or "peft"
  int n_layers() const { return static_cast<int>(layers_.size()); }
  float user_scale() const { return user_scale_; }

  // nullptr when the adapter leaves this projection as it is.
  const LoraWeights* find(int layer, LoraTarget target) const;
  // Throws Error(kCorrupt) when the projection is already set (a file naming it twice).
  void set(int layer, LoraTarget target, LoraWeights weights);
  // Adapted projections over all layers.
  int count() const;
  // Bytes of every A and B as prepared.
  uint64_t bytes() const;

  // Owners of memory the prepared matrices may still read (a file mapping, converted copies).
  std::vector<std::shared_ptr<const void>> storage;

 private:
  std::string name_, path_, format_;
  float user_scale_ = 1.0f;
  std::vector<std::array<std::optional<LoraWeights>, kLoraTargetCount>> layers_;
};

}  // namespace rapide
