// Hugging Face PEFT LoRA folders (lora/lora_load.h): adapter_config.json's settings, then the
// lora_A / lora_B pairs of adapter_model.safetensors in GGUF names and orientation.
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <string>

#include "base/aligned_buffer.h"
#include "base/error.h"
#include "base/mapped_file.h"
#include "formats/hf_loader.h"
#include "formats/model_json.h"
#include "formats/safetensors_reader.h"
#include "lora/lora_pairs.h"

namespace rapide {

namespace {

using nlohmann::json;

// The PEFT module names (the last part of a target_modules entry) of lora_target_names().
const std::set<std::string>& known_modules() {
  static const std::set<std::string> kModules = {"q_proj",    "k_proj",  "v_proj",   "o_proj",
                                                 "gate_proj", "up_proj", "down_proj"};
  return kModules;
}

bool empty_or_null(const json& config, const char* key) {
  if (!config.contains(key) || config[key].is_null()) return true;
  const json& v = config[key];
  return (v.is_object() || v.is_array()) && v.empty();
}

struct PeftSettings {
  int64_t r = 0;
  float alpha = 0.0f;
  bool rslora = false;
};

PeftSettings read_config(const std::string& dir, const json& config) {
  const auto refuse = [&](const std::string& what) {
    fail(ErrorCode::kUnsupported, "PEFT adapter '{}': {} is not supported", dir, what);
  };
  if (!config.is_object())
    fail(ErrorCode::kCorrupt, "'{}': adapter_config.json is not an object", dir);
  if (config.contains("peft_type") &&
      !(config["peft_type"].is_string() && config["peft_type"].get<std::string>() == "LORA")) {
    refuse(fmt::format("peft_type {} (rapide runs LORA)", config["peft_type"].dump()));
  }
  const auto flag = [&](const char* key) {
    if (!config.contains(key) || config[key].is_null()) return false;
    if (!config[key].is_boolean()) {
      fail(ErrorCode::kCorrupt, "'{}': adapter_config.json '{}' must be true or false", dir, key);
    }
    return config[key].get<bool>();
  };
  if (flag("use_dora")) refuse("DoRA (use_dora: true)");
  if (flag("fan_in_fan_out")) refuse("fan_in_fan_out (Conv1D weights, as GPT-2 stores them)");
  if (!empty_or_null(config, "rank_pattern")) refuse("a per-module rank (rank_pattern)");
  if (!empty_or_null(config, "alpha_pattern")) refuse("a per-module alpha (alpha_pattern)");
  if (!empty_or_null(config, "modules_to_save")) {
    refuse(fmt::format("modules_to_save {} (fully trained modules besides the LoRA pairs)",
                       config["modules_to_save"].dump()));
  }
  if (config.contains("bias") && !(config["bias"].is_string() && config["bias"] == "none")) {
    refuse(fmt::format("bias {} (trained biases)", config["bias"].dump()));
  }
  if (config.contains("target_modules") && config["target_modules"].is_array()) {
    for (const json& m : config["target_modules"]) {
      const std::string name = m.is_string() ? m.get<std::string>() : m.dump();
      const std::string module = name.substr(name.rfind('.') + 1);
      if (known_modules().count(module) == 0) {
        refuse(
            fmt::format("target module '{}' (rapide adapts q_proj, k_proj, v_proj, o_proj, "
                        "gate_proj, up_proj and down_proj)",
                        name));
      }
    }
  }  // a string is a regular expression or "all-linear": the tensors say what it matched
  PeftSettings s;
  if (!config.contains("r") || !config["r"].is_number_integer() ||
      config["r"].get<int64_t>() <= 0) {
    fail(ErrorCode::kCorrupt, "'{}': adapter_config.json 'r' must be a positive integer", dir);
  }
  s.r = config["r"].get<int64_t>();
  // PEFT's scale is lora_alpha / r, so 0 would turn the adapter off; llama.cpp reads a GGUF
  // alpha of 0 as "no alpha" instead (lora_scale): refused rather than read either way.
  if (!config.contains("lora_alpha") || !config["lora_alpha"].is_number() ||
      !(config["lora_alpha"].get<float>() > 0.0f)) {
    fail(ErrorCode::kCorrupt, "'{}': adapter_config.json 'lora_alpha' must be a positive number",
         dir);
  }
  s.alpha = config["lora_alpha"].get<float>();
  s.rslora = flag("use_rslora");
  return s;
}

// "base_model.model.<module>.lora_A.weight" -> (<module>.weight, is A). Refuses by name the
// tensors of features rapide does not run.
std::pair<std::string, bool> split_peft_name(const std::string& dir, const std::string& name) {
  constexpr std::string_view kPrefix = "base_model.model.";
  const auto refuse = [&](const char* what) {
    fail(ErrorCode::kUnsupported, "PEFT adapter '{}': tensor '{}' is {}, which is not supported",
         dir, name, what);
  };
  if (name.find("lora_magnitude_vector") != std::string::npos) refuse("a DoRA magnitude");
  if (name.find("lora_embedding_") != std::string::npos) refuse("an embedding adapter");
  if (name.ends_with(".lora_A.bias") || name.ends_with(".lora_B.bias")) refuse("a LoRA bias");
  const bool a = name.ends_with(".lora_A.weight");
  if (!name.starts_with(kPrefix) || !(a || name.ends_with(".lora_B.weight"))) {
    fail(ErrorCode::kCorrupt,
         "PEFT adapter '{}': tensor '{}' is not base_model.model.<module>.lora_A/lora_B.weight",
         dir, name);
  }
  const size_t end = name.size() - std::string_view(".lora_A.weight").size();
  return {name.substr(kPrefix.size(), end - kPrefix.size()) + ".weight", a};
}

struct Pair {
  const SafetensorsTensor* a = nullptr;
  const SafetensorsTensor* b = nullptr;
};

}  // namespace

std::shared_ptr<const LoraAdapter> load_lora_peft(const LoraSpec& spec, const ModelFile& base) {
  const std::filesystem::path dir(spec.path);
  const std::filesystem::path config_path = dir / "adapter_config.json";
  const std::filesystem::path weights_path = dir / "adapter_model.safetensors";
  if (!std::filesystem::exists(config_path)) {
    fail(ErrorCode::kNotFound, "'{}' is a folder without adapter_config.json (not a PEFT adapter)",
         spec.path);
  }
  if (!std::filesystem::exists(weights_path)) {
    fail(ErrorCode::kNotFound,
         "PEFT adapter '{}' has no adapter_model.safetensors (adapter_model.bin, pickled "
         "PyTorch, is not read)",
         spec.path);
  }
  const json config = parse_model_json(read_text_file(config_path.string()),
                                       fmt::format("'{}'", config_path.string()));
  const PeftSettings settings = read_config(spec.path, config);
  const SafetensorsFile file = SafetensorsFile::open(weights_path.string());

  const std::string& arch = base.config.architecture;
  std::map<std::string, Pair> pairs;  // by GGUF base tensor name
  for (const SafetensorsTensor& t : file.tensors()) {
    const auto [module, is_a] = split_peft_name(spec.path, t.name);
    HfTensorTarget target;
    try {
      target = gguf_target_for_hf(module, arch, spec.path);
    } catch (const Error& e) {
      fail(ErrorCode::kUnsupported,
           "PEFT adapter '{}' adapts '{}', which rapide does not map onto a {} model ({})",
           spec.path, module, arch, e.what());
    }
    if (target.name.empty() || target.expert >= 0) {
      fail(ErrorCode::kUnsupported, "PEFT adapter '{}' adapts '{}': not supported", spec.path,
           module);
    }
    Pair& p = pairs[target.name];
    (is_a ? p.a : p.b) = &t;
  }
  if (pairs.empty()) fail(ErrorCode::kCorrupt, "PEFT adapter '{}' holds no tensor", spec.path);

  auto adapter =
      std::make_shared<LoraAdapter>(spec.name, spec.path, "peft", base.config.n_layers, spec.scale);
  // Each tensor as a GGUF view: shapes reversed (ggml order), data copied (safetensors offsets
  // need not be aligned) and, for Llama's Q/K lora_B, rows permuted as the converter does.
  const auto view = [&](const SafetensorsTensor& t, const std::string& gguf_name, bool is_b) {
    auto copy = std::make_shared<AlignedBuffer<uint8_t>>(t.size_bytes);
    const int heads = is_b ? hf_rope_permute_heads(base.config, gguf_name) : 0;
    const int64_t rows = t.shape.empty() ? 0 : t.shape[0];
    if (heads > 0 && t.shape.size() == 2 && rows % (2 * heads) == 0) {
      permute_rope_rows(t.data, copy->data(), rows, static_cast<int64_t>(t.size_bytes) / rows,
                        heads);
    } else {
      // Shapes that do not split into heads fail add_lora_pair's checks against the base.
      std::memcpy(copy->data(), t.data, t.size_bytes);
    }
    adapter->storage.push_back(copy);
    return TensorView{t.name, t.type, std::vector<int64_t>(t.shape.rbegin(), t.shape.rend()),
                      copy->data(), t.size_bytes};
  };
  for (const auto& [name, pair] : pairs) {
    if (pair.a == nullptr || pair.b == nullptr) {
      fail(ErrorCode::kCorrupt, "PEFT adapter '{}': '{}' has a {} but no {}", spec.path, name,
           pair.a ? "lora_A" : "lora_B", pair.a ? "lora_B" : "lora_A");
    }
    add_lora_pair(*adapter, base, LoraPairInfo{name, settings.alpha, settings.rslora, settings.r},
                  view(*pair.a, name, false), view(*pair.b, name, true));
  }
  return adapter;
}

}  // namespace rapide
