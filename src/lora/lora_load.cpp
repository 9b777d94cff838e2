// Adapter specs, the choice of reader, and the checks every pair passes (lora/lora_load.h).
#include "lora/lora_load.h"

#include <charconv>
#include <cmath>
#include <filesystem>
#include <optional>

#include "base/error.h"
#include "lora/lora_pairs.h"

namespace rapide {

namespace {

bool valid_name(std::string_view name) {
  if (name.empty()) return false;
  for (const char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

std::optional<float> parse_scale(std::string_view text) {
  float value = 0.0f;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

// "blk.N.<target>.weight" -> (N, target text); nullopt for any other name.
std::optional<std::pair<int, std::string>> split_block_name(const std::string& name) {
  constexpr std::string_view kBlock = "blk.", kWeight = ".weight";
  if (!name.starts_with(kBlock) || !name.ends_with(kWeight)) return std::nullopt;
  const std::string_view rest =
      std::string_view(name).substr(kBlock.size(), name.size() - kBlock.size() - kWeight.size());
  const size_t dot = rest.find('.');
  if (dot == std::string_view::npos || dot == 0) return std::nullopt;
  int layer = 0;
  const auto [ptr, ec] = std::from_chars(rest.data(), rest.data() + dot, layer);
  if (ec != std::errc() || ptr != rest.data() + dot) return std::nullopt;
  return std::make_pair(layer, std::string(rest.substr(dot + 1)));
}

bool float_type(TensorType type) {
  return type == TensorType::kF32 || type == TensorType::kF16 || type == TensorType::kBF16;
}

}  // namespace

LoraSpec parse_lora_spec(std::string_view text) {
  LoraSpec spec;
  std::string_view path = text;
  if (const size_t eq = text.find('='); eq != std::string_view::npos) {
    spec.name = std::string(text.substr(0, eq));
    path = text.substr(eq + 1);
  }
  if (const size_t colon = path.rfind(':'); colon != std::string_view::npos) {
    if (const std::optional<float> scale = parse_scale(path.substr(colon + 1))) {
      if (!std::isfinite(*scale)) {
        fail(ErrorCode::kInvalidArgument, "--lora '{}': the scale must be a finite number", text);
      }
      spec.scale = *scale;
      path = path.substr(0, colon);
    }
  }
  if (path.empty()) fail(ErrorCode::kInvalidArgument, "--lora '{}' names no path", text);
  spec.path = std::string(path);
  if (spec.name.empty()) {
    spec.name = std::filesystem::path(spec.path).lexically_normal().stem().string();
    if (spec.name.empty()) {  // a folder given with a trailing '/'
      spec.name = std::filesystem::path(spec.path).parent_path().filename().string();
    }
  }
  if (!valid_name(spec.name)) {
    fail(ErrorCode::kInvalidArgument,
         "--lora '{}': adapter name '{}' must be letters, digits, '.', '_' or '-' (NAME=PATH)",
         text, spec.name);
  }
  return spec;
}

std::shared_ptr<const LoraAdapter> load_lora(const LoraSpec& spec, const ModelFile& base) {
  std::error_code ec;
  if (std::filesystem::is_directory(spec.path, ec)) return load_lora_peft(spec, base);
  return load_lora_gguf(spec, base);
}

void add_lora_pair(LoraAdapter& adapter, const ModelFile& base, const LoraPairInfo& info,
                   const TensorView& a, const TensorView& b) {
  const std::string& path = adapter.path();
  const std::string& name = info.base_name;
  if (name == "token_embd.weight" || name == "output.weight") {
    fail(ErrorCode::kUnsupported,
         "adapter '{}' adapts '{}': LoRA on the token embedding or the output head is not "
         "supported (rapide adapts {})",
         path, name, lora_target_names());
  }
  const auto block = split_block_name(name);
  const std::optional<LoraTarget> target =
      block ? lora_target_from_name(block->second) : std::nullopt;
  if (!target) {
    fail(ErrorCode::kUnsupported, "adapter '{}' adapts '{}', which rapide does not (it adapts {})",
         path, name, lora_target_names());
  }
  const ModelConfig& c = base.config;
  if (*target == LoraTarget::kUp && c.fused_gate_up) {
    fail(ErrorCode::kUnsupported,
         "adapter '{}' adapts '{}', the fused gate/up matrix of {}: not supported", path, name,
         c.architecture);
  }
  const TensorView* w = base.find(name);
  if (w == nullptr) {
    fail(ErrorCode::kInvalidArgument,
         "adapter '{}' adapts '{}', which the base model '{}' does not have (another base "
         "model?)",
         path, name, base.path);
  }
  if (a.shape.size() != 2 || b.shape.size() != 2 || w->shape.size() != 2) {
    fail(ErrorCode::kInvalidArgument, "adapter '{}': the pair for '{}' is not two matrices", path,
         name);
  }
  const int64_t in = w->shape[0], out = w->shape[1], rank = a.shape[1];
  if (a.shape[0] != in || b.shape[1] != out || b.shape[0] != rank || rank <= 0) {
    fail(ErrorCode::kInvalidArgument,
         "adapter '{}': the pair for '{}' has shapes A [{}, {}] and B [{}, {}] (ggml order), "
         "which do not fit the base's [{}, {}]: expected A [{}, r] and B [r, {}] (another base "
         "model?)",
         path, name, a.shape[0], a.shape[1], b.shape[0], b.shape[1], in, out, in, out);
  }
  if (info.rank > 0 && rank != info.rank) {
    fail(ErrorCode::kInvalidArgument, "adapter '{}': the pair for '{}' has rank {}, not r = {}",
         path, name, rank, info.rank);
  }
  for (const TensorView* t : {&a, &b}) {
    if (!float_type(t->type)) {
      fail(ErrorCode::kUnsupported,
           "adapter '{}': tensor '{}' is {}; quantized adapters are not supported (F32, F16 and "
           "BF16 are)",
           path, t->name, tensor_type_name(t->type));
    }
  }
  LoraWeights weights;
  weights.a = WeightMatrix::prepare(a);
  weights.b = WeightMatrix::prepare(b);
  weights.scale = lora_scale(adapter.user_scale(), info.alpha, rank, info.rslora);
  adapter.set(block->first, *target, std::move(weights));
}

}  // namespace rapide
