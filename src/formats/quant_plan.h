// The per-tensor type choice of `rapide quantize`: a single type for every matrix (like
// llama.cpp's `llama-quantize --pure`) or a llama.cpp-style mix by tensor role (Q4_K_M ...).
//
// choose_tensor_type() is a plain function of the tensor's name, shape, layer and the plan,
// so a calibrated quantizer can later supply its own choice per tensor. The rules follow
// llama.cpp's llama_tensor_get_type for dense (non-MoE, non-Falcon) models; they are
// re-implemented from its documented behaviour, not copied.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "formats/tensor_type.h"

namespace rapide {

enum class QuantPreset { kPure, kQ3_K_M, kQ4_K_S, kQ4_K_M, kQ5_K_S, kQ5_K_M };

struct QuantPlan {
  QuantPreset preset = QuantPreset::kPure;
  TensorType base = TensorType::kQ8_0;  // the type of tensors no rule singles out
  std::string name;                     // as the user wrote it, e.g. "Q4_K_M" or "q8_0"
};

// "q8_0" ... "iq4_xs" (any single quantized type, any case) or a preset name ("Q4_K_M", any
// case). nullopt for anything else.
std::optional<QuantPlan> parse_quant_plan(std::string_view name);
// The names parse_quant_plan accepts, for help and error messages.
std::string quant_plan_names();

// The model-wide facts the rules need: counts of attn_v and ffn_down matrices, and whether
// the model has its own output.weight (without one, token_embd is also the output matrix and
// gets the output's type, as llama.cpp does for tied embeddings).
struct QuantModelFacts {
  int n_attn_v = 0;
  int n_ffn_down = 0;
  bool has_output = true;
};

// Whether llama.cpp quantizes this tensor at all: matrices (2+ dims) whose name ends in
// "weight" and is not a norm. Everything else is copied unchanged.
bool is_quantizable_tensor(std::string_view name, const std::vector<int64_t>& shape);

// The type for one quantizable tensor. `layer` is its block index ("blk.N."), -1 if none.
// Includes llama.cpp's fallback for rows that are not a multiple of the chosen type's block
// (Q2_K/Q3_K/IQ4_XS -> IQ4_NL, Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, then F16).
TensorType choose_tensor_type(std::string_view name, const std::vector<int64_t>& shape, int layer,
                              const QuantPlan& plan, const QuantModelFacts& facts);

// llama_ftype for general.file_type of a file whose tensors are all `type` (MOSTLY_*).
uint32_t llama_file_type(TensorType type);
// llama_ftype for general.file_type (presets as their own id, single types as MOSTLY_*).
uint32_t quant_plan_file_type(const QuantPlan& plan);

}  // namespace rapide
