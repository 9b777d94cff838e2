#include "lora/lora_adapter.h"

#include <cmath>

#include "base/error.h"
#include "formats/tensor_type.h"

namespace rapide {

namespace {
constexpr const char* kTargetNames[kLoraTargetCount] = {
    "attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"};

uint64_t matrix_bytes(const WeightMatrix& m) {
  return static_cast<uint64_t>(tensor_row_bytes(m.type(), m.cols())) * m.rows();
}
}  // namespace

const char* lora_target_name(LoraTarget target) {
  return kTargetNames[static_cast<int>(target)];
}

std::optional<LoraTarget> lora_target_from_name(std::string_view name) {
  for (int t = 0; t < kLoraTargetCount; ++t) {
    if (name == kTargetNames[t]) return static_cast<LoraTarget>(t);
  }
  return std::nullopt;
}

const char* lora_target_names() {
  return "attn_q, attn_k, attn_v, attn_output, ffn_gate, ffn_up, ffn_down";
}

float lora_scale(float user_scale, float alpha, int64_t rank, bool rslora) {
  if (alpha == 0.0f) return user_scale;
  const float divisor = rslora ? std::sqrt(static_cast<float>(rank)) : static_cast<float>(rank);
  return user_scale * alpha / divisor;
}

LoraAdapter::LoraAdapter(std::string name, std::string path, std::string format, int n_layers,
                         float user_scale)
    : name_(std::move(name)),
      path_(std::move(path)),
      format_(std::move(format)),
      user_scale_(user_scale),
      layers_(static_cast<size_t>(n_layers)) {}

const LoraWeights* LoraAdapter::find(int layer, LoraTarget target) const {
  if (layer < 0 || layer >= n_layers()) return nullptr;
  const std::optional<LoraWeights>& w = layers_[layer][static_cast<int>(target)];
  return w ? &*w : nullptr;
}

void LoraAdapter::set(int layer, LoraTarget target, LoraWeights weights) {
  if (layer < 0 || layer >= n_layers()) {
    fail(ErrorCode::kCorrupt, "adapter '{}': layer {} is outside the base model's 0..{}", path_,
         layer, n_layers() - 1);
  }
  std::optional<LoraWeights>& slot = layers_[layer][static_cast<int>(target)];
  if (slot) {
    fail(ErrorCode::kCorrupt, "adapter '{}' adapts blk.{}.{} twice", path_, layer,
         lora_target_name(target));
  }
  slot = std::move(weights);
}

int LoraAdapter::count() const {
  int n = 0;
  for (const auto& layer : layers_) {
    for (const auto& w : layer) n += w.has_value();
  }
  return n;
}

uint64_t LoraAdapter::bytes() const {
  uint64_t total = 0;
  for (const auto& layer : layers_) {
    for (const auto& w : layer) {
      if (w) total += matrix_bytes(w->a) + matrix_bytes(w->b);
    }
  }
  return total;
}

}  // namespace rapide
