// llama.cpp's per-role quantization rules (llama_tensor_get_type), dense models only.
#include "formats/quant_plan.h"

#include <algorithm>
#include <cctype>

namespace rapide {
namespace {

struct PresetInfo {
  const char* name;
  QuantPreset preset;
  TensorType base;
  uint32_t file_type;  // llama_ftype
};

constexpr PresetInfo kPresets[] = {
    {"Q3_K_M", QuantPreset::kQ3_K_M, TensorType::kQ3_K, 12},
    {"Q4_K_S", QuantPreset::kQ4_K_S, TensorType::kQ4_K, 14},
    {"Q4_K_M", QuantPreset::kQ4_K_M, TensorType::kQ4_K, 15},
    {"Q5_K_S", QuantPreset::kQ5_K_S, TensorType::kQ5_K, 16},
    {"Q5_K_M", QuantPreset::kQ5_K_M, TensorType::kQ5_K, 17},
};

constexpr TensorType kSingleTypes[] = {TensorType::kQ8_0, TensorType::kQ4_0,   TensorType::kQ4_1,
                                       TensorType::kQ5_0, TensorType::kQ5_1,   TensorType::kQ2_K,
                                       TensorType::kQ3_K, TensorType::kQ4_K,   TensorType::kQ5_K,
                                       TensorType::kQ6_K, TensorType::kIQ4_NL, TensorType::kIQ4_XS};

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

bool contains(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

// llama.cpp's use_more_bits: the first and last eighth of the layers and every third one
// between get the larger type.
bool use_more_bits(int i, int n) {
  return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

// The role rules before the block-size fallback.
TensorType role_type(std::string_view name, int layer, const QuantPlan& plan,
                     const QuantModelFacts& facts) {
  const QuantPreset p = plan.preset;
  TensorType t = plan.base;
  if (p == QuantPreset::kPure) return t;
  // The output matrix (token_embd when tied): Q6_K, or Q8_0 by the fallback below when its
  // rows are not whole super-blocks.
  if (name == "output.weight" || (!facts.has_output && name == "token_embd.weight"))
    return TensorType::kQ6_K;
  if (contains(name, "attn_v.weight")) {
    if (p == QuantPreset::kQ3_K_M) return layer < 2 ? TensorType::kQ5_K : TensorType::kQ4_K;
    if ((p == QuantPreset::kQ4_K_M || p == QuantPreset::kQ5_K_M) &&
        use_more_bits(layer, facts.n_attn_v))
      return TensorType::kQ6_K;
    if (p == QuantPreset::kQ4_K_S && layer < 4) return TensorType::kQ5_K;
    return t;
  }
  if (contains(name, "ffn_down")) {
    const int n = facts.n_ffn_down;
    if (p == QuantPreset::kQ3_K_M) return layer < n / 16 ? TensorType::kQ5_K : TensorType::kQ4_K;
    if ((p == QuantPreset::kQ4_K_M || p == QuantPreset::kQ5_K_M) && use_more_bits(layer, n))
      return TensorType::kQ6_K;
    if (p == QuantPreset::kQ4_K_S && layer < n / 8) return TensorType::kQ5_K;
    return t;
  }
  if (contains(name, "attn_output.weight")) {
    if (p == QuantPreset::kQ3_K_M) return TensorType::kQ4_K;
    return t;
  }
  if (contains(name, "attn_qkv.weight")) {
    if (p == QuantPreset::kQ3_K_M) return TensorType::kQ4_K;
    if (p == QuantPreset::kQ4_K_M) return TensorType::kQ5_K;
    if (p == QuantPreset::kQ5_K_M) return TensorType::kQ6_K;
  }
  return t;
}

}  // namespace

std::optional<QuantPlan> parse_quant_plan(std::string_view name) {
  for (const PresetInfo& p : kPresets) {
    if (iequals(name, p.name)) return QuantPlan{p.preset, p.base, std::string(name)};
  }
  for (TensorType t : kSingleTypes) {
    if (iequals(name, tensor_type_name(t)))
      return QuantPlan{QuantPreset::kPure, t, std::string(name)};
  }
  return std::nullopt;
}

std::string quant_plan_names() {
  std::string out;
  for (TensorType t : kSingleTypes) out += std::string(tensor_type_name(t)) + ", ";
  for (const PresetInfo& p : kPresets) out += std::string(p.name) + ", ";
  out.resize(out.size() - 2);
  return out;
}

bool is_quantizable_tensor(std::string_view name, const std::vector<int64_t>& shape) {
  return shape.size() >= 2 && name.ends_with("weight") && !contains(name, "_norm.weight") &&
         !contains(name, "ffn_gate_inp.weight");
}

TensorType choose_tensor_type(std::string_view name, const std::vector<int64_t>& shape, int layer,
                              const QuantPlan& plan, const QuantModelFacts& facts) {
  TensorType t = role_type(name, layer, plan, facts);
  const int64_t cols = shape.empty() ? 0 : shape[0];
  if (cols % tensor_type_block_size(t) != 0) {
    // llama.cpp's fallback for rows that do not fill whole 256-weight super-blocks.
    switch (t) {
      case TensorType::kQ2_K:
      case TensorType::kQ3_K:
      case TensorType::kIQ4_XS:
        t = TensorType::kIQ4_NL;
        break;
      case TensorType::kQ4_K:
        t = TensorType::kQ5_0;
        break;
      case TensorType::kQ5_K:
        t = TensorType::kQ5_1;
        break;
      case TensorType::kQ6_K:
        t = TensorType::kQ8_0;
        break;
      default:
        break;
    }
    if (cols % tensor_type_block_size(t) != 0) t = TensorType::kF16;
  }
  return t;
}

uint32_t llama_file_type(TensorType type) {
  switch (type) {  // llama_ftype: MOSTLY_*, a k-quant as its _S variant
    case TensorType::kF32:
      return 0;
    case TensorType::kF16:
      return 1;
    case TensorType::kQ4_0:
      return 2;
    case TensorType::kQ4_1:
      return 3;
    case TensorType::kQ8_0:
      return 7;
    case TensorType::kQ5_0:
      return 8;
    case TensorType::kQ5_1:
      return 9;
    case TensorType::kQ2_K:
      return 10;
    case TensorType::kQ3_K:
      return 11;
    case TensorType::kQ4_K:
      return 14;
    case TensorType::kQ5_K:
      return 16;
    case TensorType::kQ6_K:
      return 18;
    case TensorType::kIQ4_NL:
      return 25;
    case TensorType::kIQ4_XS:
      return 30;
    case TensorType::kBF16:
      return 32;
  }
  return 0;
}

uint32_t quant_plan_file_type(const QuantPlan& plan) {
  for (const PresetInfo& p : kPresets) {
    if (p.preset == plan.preset) return p.file_type;
  }
  return llama_file_type(plan.base);
}

}  // namespace rapide
