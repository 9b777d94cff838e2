// llama.cpp's LoRA GGUF (lora/lora_load.h): the metadata llama.cpp's own loader checks
// (llama-adapter.cpp), then every lora_a / lora_b pair.
#include <map>
#include <string>

#include "base/error.h"
#include "formats/gguf_reader.h"
#include "lora/lora_pairs.h"

namespace rapide {

namespace {

TensorView view_of(const GgufTensorInfo& t) {
  return TensorView{t.name, t.type, t.shape, t.data, t.size_bytes};
}

struct Pair {
  const GgufTensorInfo* a = nullptr;
  const GgufTensorInfo* b = nullptr;
};

}  // namespace

std::shared_ptr<const LoraAdapter> load_lora_gguf(const LoraSpec& spec, const ModelFile& base) {
  const GgufFile file = GgufFile::open(spec.path);
  const std::string type = file.get_string_or("general.type", "");
  if (type != "adapter") {
    fail(ErrorCode::kInvalidArgument,
         "'{}' is not a LoRA adapter: its general.type is '{}', not 'adapter'{}", spec.path,
         type.empty() ? "(none)" : type, type == "model" || type.empty() ? " (a model file?)" : "");
  }
  const std::string adapter_type = file.get_string_or("adapter.type", "");
  if (adapter_type != "lora") {
    fail(ErrorCode::kUnsupported, "adapter '{}' is of type '{}'; rapide runs LoRA adapters only",
         spec.path, adapter_type);
  }
  const std::string arch = file.get_string_or("general.architecture", "");
  if (arch != base.config.architecture) {
    fail(ErrorCode::kInvalidArgument,
         "adapter '{}' was made for architecture '{}', but the base model '{}' is '{}'", spec.path,
         arch, base.path, base.config.architecture);
  }
  // llama.cpp reads a missing alpha as 0: the scale is then the user's alone.
  const float alpha = file.get_f32_or("adapter.lora.alpha", 0.0f);

  std::map<std::string, Pair> pairs;  // by base tensor name, in name order
  for (const GgufTensorInfo& t : file.tensors()) {
    if (t.name.ends_with(".lora_a")) {
      pairs[t.name.substr(0, t.name.size() - 7)].a = &t;
    } else if (t.name.ends_with(".lora_b")) {
      pairs[t.name.substr(0, t.name.size() - 7)].b = &t;
    } else if (t.name.ends_with("_norm.weight")) {
      // llama.cpp skips these (mergekit-extract-lora writes trained norms); running without
      // them would not be the fine-tune that was trained.
      fail(ErrorCode::kUnsupported,
           "adapter '{}' holds the norm tensor '{}': adapters that replace norm weights are "
           "not supported",
           spec.path, t.name);
    } else {
      fail(ErrorCode::kCorrupt, "adapter '{}': tensor '{}' is neither a lora_a nor a lora_b",
           spec.path, t.name);
    }
  }
  if (pairs.empty()) fail(ErrorCode::kCorrupt, "adapter '{}' holds no tensor", spec.path);

  auto adapter =
      std::make_shared<LoraAdapter>(spec.name, spec.path, "gguf", base.config.n_layers, spec.scale);
  adapter->storage.push_back(file.owner());  // the mapping the F32 views may read
  for (const auto& [name, pair] : pairs) {
    if (pair.a == nullptr || pair.b == nullptr) {
      fail(ErrorCode::kCorrupt, "adapter '{}': '{}' has a {} but no {}", spec.path, name,
           pair.a ? "lora_a" : "lora_b", pair.a ? "lora_b" : "lora_a");
    }
    add_lora_pair(*adapter, base, LoraPairInfo{name, alpha, false, 0}, view_of(*pair.a),
                  view_of(*pair.b));
  }
  return adapter;
}

}  // namespace rapide
