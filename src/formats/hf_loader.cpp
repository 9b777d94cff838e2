#include "formats/hf_loader.h"

#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <numbers>
#include <optional>
#include <set>
#include <string_view>

#include "base/aligned_buffer.h"
#include "base/error.h"
#include "base/fp16.h"
#include "base/mapped_file.h"
#include "formats/architecture.h"
#include "formats/gguf_model.h"
#include "formats/hf_config_keys.h"
#include "formats/hf_tokenizer.h"
#include "formats/model_checks.h"
#include "formats/model_json.h"
#include "formats/safetensors_reader.h"
#include "formats/unused_tensors.h"

namespace rapide {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json parse_json_file(const fs::path& path) {
  return parse_model_json(read_text_file(path.string()), fmt::format("'{}'", path.string()));
}

int json_int(const json& config, const char* key, const std::string& name, int fallback = -1) {
  if (!config.contains(key) || config[key].is_null()) {
    if (fallback >= 0) return fallback;
    fail(ErrorCode::kCorrupt, "'{}': config.json lacks '{}'", name, key);
  }
  const json& v = config[key];
  if (!v.is_number_integer() || v.get<int64_t>() <= 0 || v.get<int64_t>() > INT32_MAX) {
    fail(ErrorCode::kCorrupt, "'{}': config.json '{}' must be a positive integer", name, key);
  }
  return v.get<int>();
}

float json_float(const json& config, const char* key, const std::string& name, float fallback) {
  if (!config.contains(key) || config[key].is_null()) return fallback;
  if (!config[key].is_number() || !(config[key].get<double>() > 0.0)) {
    fail(ErrorCode::kCorrupt, "'{}': config.json '{}' must be a positive number", name, key);
  }
  return config[key].get<float>();
}

// bos_token_id / eos_token_id may be an int, a list of ints (first wins) or null.
int json_token_id(const json& config, const char* key) {
  if (!config.contains(key)) return -1;
  const json& v = config[key];
  if (v.is_number_integer()) return v.get<int>();
  if (v.is_array() && !v.empty() && v[0].is_number_integer()) return v[0].get<int>();
  return -1;
}

// Views with the element alignment kernels assume; safetensors offsets need not give it.
const uint8_t* aligned_view(ModelFile& m, const SafetensorsTensor& t) {
  const size_t element = t.type == TensorType::kF32 ? 4 : 2;
  if (reinterpret_cast<uintptr_t>(t.data) % element == 0) return t.data;
  auto copy = std::make_shared<AlignedBuffer<uint8_t>>(t.size_bytes);
  std::memcpy(copy->data(), t.data, t.size_bytes);
  m.storage.push_back(copy);
  return copy->data();
}

// config.json `architectures` name -> GGUF architecture. The rope layout follows from the
// GGUF name (rope_style_for_architecture); llama's NORM layout holds after the Q/K permutation.
struct HfArchitecture {
  const char* hf;
  const char* gguf;
};
constexpr HfArchitecture kHfArchitectures[] = {
    {"LlamaForCausalLM", "llama"},       {"MistralForCausalLM", "llama"},
    {"MixtralForCausalLM", "llama"},     {"Qwen2ForCausalLM", "qwen2"},
    {"Qwen2MoeForCausalLM", "qwen2moe"}, {"Phi3ForCausalLM", "phi3"},
    {"Gemma2ForCausalLM", "gemma2"},     {"Gemma3ForCausalLM", "gemma3"},
    {"Qwen3ForCausalLM", "qwen3"},
};

bool json_bool(const json& config, const char* key, const std::string& name, bool fallback) {
  if (!config.contains(key) || config[key].is_null()) return fallback;
  if (!config[key].is_boolean()) {
    fail(ErrorCode::kCorrupt, "'{}': config.json '{}' must be true or false", name, key);
  }
  return config[key].get<bool>();
}

// Gemma 2's soft-caps: null turns the cap off, absence means the default.
float json_float_or_off(const json& config, const char* key, const std::string& name,
                        float fallback) {
  if (config.contains(key) && config[key].is_null()) return 0.0f;
  return json_float(config, key, name, fallback);
}

// The Gemma 2 keys llama.cpp's converter reads from transformers' Gemma2Config (defaults as
// there), and the variants rapide does not compute.
void read_gemma2_config(const json& config, const std::string& name, ModelConfig& c) {
  c.attn_softcap = json_float_or_off(config, "attn_logit_softcapping", name, 50.0f);
  c.final_softcap = json_float_or_off(config, "final_logit_softcapping", name, 30.0f);
  // Likewise the window: null means every layer attends to the whole context.
  c.sliding_window = config.contains("sliding_window") && config["sliding_window"].is_null()
                         ? 0
                         : json_int(config, "sliding_window", name, 4096);
  // The attention scale is stored (query_pre_attn_scalar), not derived from the model size as
  // llama.cpp must for GGUF files (architecture.cpp).
  c.query_scale = 1.0f / std::sqrt(json_float(config, "query_pre_attn_scalar", name, 256.0f));
  if (config.contains("hidden_activation") && config["hidden_activation"].is_string() &&
      config["hidden_activation"].get<std::string>() != "gelu_pytorch_tanh") {
    fail(ErrorCode::kUnsupported,
         "'{}': hidden_activation '{}' is not supported (Gemma 2 runs gelu_pytorch_tanh)", name,
         config["hidden_activation"].get<std::string>());
  }
  if (config.contains("layer_types") && !config["layer_types"].is_null()) {
    const json& types = config["layer_types"];
    bool even_windowed = types.is_array() && types.size() == static_cast<size_t>(c.n_layers);
    for (size_t l = 0; even_windowed && l < types.size(); ++l) {
      even_windowed = types[l] == (l % 2 == 0 ? "sliding_attention" : "full_attention");
    }
    if (!even_windowed) {
      fail(ErrorCode::kUnsupported,
           "'{}': config.json layer_types is not Gemma 2's pattern (sliding_attention on even "
           "layers, full_attention on odd ones)",
           name);
    }
  }
}

// Gemma 3 (text): gemma2's keys plus separate rope bases for the local and global layers, and
// the period of local layers (sliding_window_pattern, or the explicit layer_types list, which
// must follow that period: rapide computes windows by period, so any other list is refused).
void read_gemma3_config(const json& config, const std::string& name, ModelConfig& c) {
  c.attn_softcap = json_float_or_off(config, "attn_logit_softcapping", name, 0.0f);
  c.final_softcap = json_float_or_off(config, "final_logit_softcapping", name, 0.0f);
  c.sliding_window = json_int(config, "sliding_window", name, 4096);
  c.query_scale = 1.0f / std::sqrt(json_float(config, "query_pre_attn_scalar", name, 256.0f));
  c.rope_theta_local = json_float(config, "rope_local_base_freq", name, 10000.0f);
  c.window_period = json_int(config, "sliding_window_pattern", name, 6);
  if (c.window_period < 1) {
    fail(ErrorCode::kCorrupt, "'{}': sliding_window_pattern {} must be positive", name,
         c.window_period);
  }
  if (config.contains("hidden_activation") && config["hidden_activation"].is_string() &&
      config["hidden_activation"].get<std::string>() != "gelu_pytorch_tanh") {
    fail(ErrorCode::kUnsupported,
         "'{}': hidden_activation '{}' is not supported (Gemma 3 runs gelu_pytorch_tanh)", name,
         config["hidden_activation"].get<std::string>());
  }
  if (config.contains("layer_types") && !config["layer_types"].is_null()) {
    const json& types = config["layer_types"];
    bool periodic = types.is_array() && types.size() == static_cast<size_t>(c.n_layers);
    for (size_t l = 0; periodic && l < types.size(); ++l) {
      const bool local = static_cast<int>(l) % c.window_period < c.window_period - 1;
      periodic = types[l] == (local ? "sliding_attention" : "full_attention");
    }
    if (!periodic) {
      fail(ErrorCode::kUnsupported,
           "'{}': config.json layer_types does not follow sliding_window_pattern {} (rapide "
           "computes local and global layers by period)",
           name, c.window_period);
    }
  }
}

void read_qwen2moe_config(const json& config, const std::string& name, ModelConfig& c) {
  c.n_experts = json_int(config, "num_experts", name);
  c.n_experts_used = json_int(config, "num_experts_per_tok", name);
  c.expert_ffn_dim = json_int(config, "moe_intermediate_size", name);
  c.shared_expert_ffn_dim = json_int(config, "shared_expert_intermediate_size", name);
  // transformers renormalises the top-k weights when norm_topk_prob is set; llama.cpp never
  // does for qwen2moe, which matches the default (false) that Qwen1.5-MoE ships with.
  c.normalize_expert_weights = json_bool(config, "norm_topk_prob", name, false);
  const bool dense_layers =
      json_int(config, "decoder_sparse_step", name, 1) != 1 ||
      (config.contains("mlp_only_layers") && config["mlp_only_layers"].is_array() &&
       !config["mlp_only_layers"].empty());
  if (dense_layers) {
    fail(ErrorCode::kUnsupported,
         "'{}': dense layers between mixture-of-experts layers (decoder_sparse_step, "
         "mlp_only_layers) are not supported",
         name);
  }
}

std::string rope_scaling_type(const json& s) {
  if (!s.is_object()) return "";
  if (s.contains("rope_type") && s["rope_type"].is_string()) return s["rope_type"];
  if (s.contains("type") && s["type"].is_string()) return s["type"];
  return "";
}

// rope_scaling as transformers' ROPE_INIT_FUNCTIONS read it, mapped to llama.cpp's terms
// (model/rope.h): linear; llama3 (factors computed at load, hf_rope_factors); yarn (ggml
// multiplies the magnitude by 1 + 0.1 ln(factor) itself, transformers' default
// attention_factor, so an explicit one is divided by it); longrope (the two factor lists
// become tensors at load). Anything else is refused by name.
void read_hf_rope_scaling(const json& config, const std::string& name, ModelConfig& c) {
  if (!config.contains("rope_scaling") || config["rope_scaling"].is_null()) return;
  const json& s = config["rope_scaling"];
  const std::string type = rope_scaling_type(s);
  static const std::set<std::string> kKnownKeys = {
      "rope_type",        "type",
      "factor",           "low_freq_factor",
      "high_freq_factor", "original_max_position_embeddings",
      "attention_factor", "beta_fast",
      "beta_slow",        "short_factor",
      "long_factor"};
  for (const auto& [key, value] : s.items()) {
    if (!kKnownKeys.contains(key)) {
      fail(ErrorCode::kUnsupported, "'{}': rope_scaling key '{}' is not supported", name, key);
    }
  }
  if (type == "default") return;
  if (type == "linear") {
    c.rope_scale = json_float(s, "factor", name, 0.0f);
    if (!(c.rope_scale > 0.0f)) {
      fail(ErrorCode::kCorrupt, "'{}': linear rope_scaling needs a positive factor", name);
    }
    c.rope_scaling = RopeScaling::kLinear;
  } else if (type == "llama3") {
    c.rope_freq_factors = true;  // rope_freqs.weight, made by load_hf
  } else if (type == "yarn") {
    c.rope_scaling = RopeScaling::kYarn;
    c.rope_scale = json_float(s, "factor", name, 0.0f);
    if (!(c.rope_scale >= 1.0f)) {
      fail(ErrorCode::kCorrupt, "'{}': yarn rope_scaling needs a factor >= 1", name);
    }
    c.rope_orig_context = json_int(s, "original_max_position_embeddings", name, c.max_context);
    c.yarn_ext_factor = 1.0f;
    c.yarn_beta_fast = json_float(s, "beta_fast", name, 32.0f);
    c.yarn_beta_slow = json_float(s, "beta_slow", name, 1.0f);
    if (s.contains("attention_factor") && !s["attention_factor"].is_null()) {
      c.yarn_attn_factor =
          json_float(s, "attention_factor", name, 1.0f) / (1.0f + 0.1f * std::log(c.rope_scale));
    }
  } else if (type == "longrope") {
    c.rope_scaling = RopeScaling::kLongRope;
    c.rope_orig_context = json_int(config, "original_max_position_embeddings", name,
                                   json_int(s, "original_max_position_embeddings", name, 0));
    if (c.rope_orig_context <= 0) {
      fail(ErrorCode::kCorrupt, "'{}': longrope needs original_max_position_embeddings", name);
    }
    const float scale = static_cast<float>(c.max_context) / c.rope_orig_context;
    c.yarn_attn_factor =
        s.contains("attention_factor") && !s["attention_factor"].is_null()
            ? json_float(s, "attention_factor", name, 1.0f)
            : (scale <= 1.0f
                   ? 1.0f
                   : std::sqrt(1.0f + std::log(scale) /
                                          std::log(static_cast<float>(c.rope_orig_context))));
  } else {
    fail(ErrorCode::kUnsupported,
         "'{}': rope_scaling type '{}' is not supported (linear, llama3, yarn, longrope)", name,
         type);
  }
}

// Per-frequency rope divisors a Hugging Face config implies, as llama.cpp's converter writes
// them into rope_freqs.weight (llama3) or rope_factors_{short,long}.weight (longrope).
std::vector<std::pair<std::string, std::vector<float>>> hf_rope_factors(const json& config,
                                                                        const ModelConfig& c,
                                                                        const std::string& name) {
  std::vector<std::pair<std::string, std::vector<float>>> out;
  if (!config.contains("rope_scaling") || config["rope_scaling"].is_null()) return out;
  const json& s = config["rope_scaling"];
  const std::string type = rope_scaling_type(s);
  const int half = c.rotary_dims() / 2;
  if (type == "llama3") {
    // convert_hf_to_gguf.py's LlamaModel.generate_extra_tensors (float32 throughout).
    const float factor = json_float(s, "factor", name, 8.0f);
    const float low = json_float(s, "low_freq_factor", name, 1.0f);
    const float high = json_float(s, "high_freq_factor", name, 4.0f);
    const float orig =
        static_cast<float>(json_int(s, "original_max_position_embeddings", name, 8192));
    if (!(factor > 0.0f) || !(high > low)) {
      fail(ErrorCode::kCorrupt, "'{}': llama3 rope_scaling needs factor > 0, high > low", name);
    }
    const float low_wavelen = orig / low, high_wavelen = orig / high;
    std::vector<float> f(half);
    for (int i = 0; i < half; ++i) {
      const float freq = 1.0f / std::pow(c.rope_theta, static_cast<float>(2 * i) / c.rotary_dims());
      const float wavelen = 2.0f * static_cast<float>(std::numbers::pi) / freq;
      if (wavelen < high_wavelen) {
        f[i] = 1.0f;
      } else if (wavelen > low_wavelen) {
        f[i] = factor;
      } else {
        const float smooth = (orig / wavelen - low) / (high - low);
        f[i] = 1.0f / ((1.0f - smooth) / factor + smooth);
      }
    }
    out.emplace_back("rope_freqs.weight", std::move(f));
  } else if (type == "longrope") {
    for (const char* key : {"short_factor", "long_factor"}) {
      if (!s.contains(key) || !s[key].is_array() || s[key].size() != static_cast<size_t>(half)) {
        fail(ErrorCode::kCorrupt, "'{}': longrope {} must list {} numbers", name, key, half);
      }
      std::vector<float> f;
      for (const json& v : s[key]) {
        if (!v.is_number())
          fail(ErrorCode::kCorrupt, "'{}': longrope {} holds a non-number", name, key);
        f.push_back(v.get<float>());
      }
      out.emplace_back(std::string(key) == "short_factor" ? "rope_factors_short.weight"
                                                          : "rope_factors_long.weight",
                       std::move(f));
    }
  }
  return out;
}

// The element type's value as F32 (the safetensors dtypes: F32, F16, BF16).
float element_f32(TensorType type, const uint8_t* data, int64_t i) {
  if (type == TensorType::kF32) {
    float v;
    std::memcpy(&v, data + 4 * i, 4);
    return v;
  }
  uint16_t h;
  std::memcpy(&h, data + 2 * i, 2);
  return type == TensorType::kF16 ? fp16_to_fp32(h) : bf16_to_fp32(h);
}

// The TensorView of one (non-expert) tensor, with the converter's changes (hf_loader.h).
TensorView adapt_tensor(ModelFile& m, const SafetensorsTensor& t, std::string name,
                        const std::string& dir) {
  const ModelConfig& c = m.config;
  TensorView view{std::move(name), t.type, std::vector<int64_t>(t.shape.rbegin(), t.shape.rend()),
                  aligned_view(m, t), t.size_bytes};
  if (const int heads = hf_rope_permute_heads(c, view.name); heads > 0) {
    const int64_t rows = t.shape[0];
    if (rows % (2 * heads) != 0) {
      fail(ErrorCode::kCorrupt, "'{}': tensor '{}' has {} rows, not a multiple of 2 x {} heads",
           dir, t.name, rows, heads);
    }
    auto copy = std::make_shared<AlignedBuffer<uint8_t>>(t.size_bytes);
    permute_rope_rows(view.data, copy->data(), rows, static_cast<int64_t>(t.size_bytes) / rows,
                      heads);
    m.storage.push_back(copy);
    view.data = copy->data();
  }
  if ((c.architecture == "gemma2" || c.architecture == "gemma3") &&
      view.name.ends_with("norm.weight")) {
    const int64_t n = view.element_count();
    auto copy = std::make_shared<AlignedBuffer<float>>(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) (*copy)[i] = element_f32(t.type, view.data, i) + 1.0f;
    m.storage.push_back(copy);
    view.type = TensorType::kF32;
    view.data = reinterpret_cast<const uint8_t*>(copy->data());
    view.size_bytes = static_cast<size_t>(n) * sizeof(float);
  }
  return view;
}

// A name split around an index: `head` + marker + index + "." + `rest` ("model.layers.3.mlp"
// at "model.layers.", "mlp.experts.5.w1" at ".experts.").
struct IndexedName {
  std::string head;
  int index = 0;
  std::string rest;
};

// Splits `name` at the last `marker` followed by 1-6 digits, a dot and more text; nullopt
// when the name has no such part.
std::optional<IndexedName> split_at_index(const std::string& name, std::string_view marker) {
  const size_t at = name.rfind(marker);
  if (at == std::string::npos) return std::nullopt;
  const size_t first = at + marker.size();
  size_t end = first;
  while (end < name.size() && end - first < 7 && name[end] >= '0' && name[end] <= '9') ++end;
  if (end == first || end - first > 6 || end + 1 >= name.size() || name[end] != '.') {
    return std::nullopt;
  }
  return IndexedName{name.substr(0, at), std::stoi(name.substr(first, end - first)),
                     name.substr(end + 1)};
}

// The Hugging Face name of expert `e` in the layout of `hf` (another expert's name).
std::string expert_hf_name(const std::string& hf, int e) {
  const auto parts = split_at_index(hf, ".experts.");
  return parts ? fmt::format("{}.experts.{}.{}", parts->head, e, parts->rest) : hf;
}

// One stacked expert tensor from its per-expert parts (hf_loader.h).
TensorView stack_experts(ModelFile& m, const std::string& name,
                         const std::map<int, SafetensorsTensor>& parts, const std::string& dir) {
  const int n = m.config.n_experts;
  const SafetensorsTensor& first = parts.begin()->second;
  if (n == 0) {
    fail(ErrorCode::kCorrupt, "'{}': expert tensor '{}' but config.json declares no experts", dir,
         first.name);
  }
  if (parts.rbegin()->first >= n) {
    fail(ErrorCode::kCorrupt, "'{}': tensor '{}' is expert {} but config.json declares {} experts",
         dir, parts.rbegin()->second.name, parts.rbegin()->first, n);
  }
  for (int e = 0; e < n; ++e) {
    if (!parts.contains(e)) {
      fail(ErrorCode::kCorrupt, "'{}': missing tensor '{}' (config.json declares {} experts)", dir,
           expert_hf_name(first.name, e), n);
    }
  }
  for (const auto& [e, t] : parts) {
    if (t.type != first.type || t.shape != first.shape || t.shape.size() != 2) {
      fail(ErrorCode::kCorrupt,
           "'{}': tensor '{}' is {} [{}] but '{}' is {} [{}]: the experts of a layer must be "
           "matrices of one dtype and shape",
           dir, t.name, tensor_type_name(t.type), fmt::join(t.shape, ", "), first.name,
           tensor_type_name(first.type), fmt::join(first.shape, ", "));
    }
  }
  auto stacked = std::make_shared<AlignedBuffer<uint8_t>>(first.size_bytes * n);
  for (const auto& [e, t] : parts) {
    std::memcpy(stacked->data() + first.size_bytes * e, t.data, t.size_bytes);
  }
  m.storage.push_back(stacked);
  return {
      name, first.type, {first.shape[1], first.shape[0], n}, stacked->data(), first.size_bytes * n};
}

}  // namespace

const char* hf_architectures() {
  static const std::string list = [] {
    std::string s;
    for (const HfArchitecture& a : kHfArchitectures)
      s += (s.empty() ? "" : ", ") + std::string(a.hf);
    return s;
  }();
  return list.c_str();
}

ModelConfig config_from_hf_json(const std::string& config_json, const std::string& name) {
  const json config = parse_model_json(config_json, fmt::format("'{}': config.json", name));
  if (!config.is_object()) fail(ErrorCode::kCorrupt, "'{}': config.json is not an object", name);
  std::string arch;
  if (config.contains("architectures") && config["architectures"].is_array() &&
      !config["architectures"].empty() && config["architectures"][0].is_string()) {
    arch = config["architectures"][0].get<std::string>();
  }
  ModelConfig c;
  const auto known = std::find_if(std::begin(kHfArchitectures), std::end(kHfArchitectures),
                                  [&](const HfArchitecture& a) { return arch == a.hf; });
  if (known == std::end(kHfArchitectures)) {
    fail(ErrorCode::kUnsupported, "'{}': architecture '{}' is not supported ({})", name,
         arch.empty() ? "(none)" : arch, hf_architectures());
  }
  // Every key is known before any is trusted (hf_config_keys.h).
  check_hf_config_keys(config, arch, name);
  c.architecture = known->gguf;
  c.rope_style = rope_style_for_architecture(c.architecture);
  if (arch == "Phi3ForCausalLM") {
    c.fused_qkv = true;  // qkv_proj; gate_up_proj is fused too (architecture.h)
  }
  c.name = fs::path(name).filename().string();
  c.dim = json_int(config, "hidden_size", name);
  c.ffn_dim = json_int(config, "intermediate_size", name);
  c.n_layers = json_int(config, "num_hidden_layers", name);
  c.n_heads = json_int(config, "num_attention_heads", name);
  c.n_kv_heads = json_int(config, "num_key_value_heads", name, c.n_heads);
  c.vocab_size = json_int(config, "vocab_size", name);
  c.max_context = json_int(config, "max_position_embeddings", name, 2048);
  if (c.n_heads % c.n_kv_heads != 0) {
    fail(ErrorCode::kCorrupt, "'{}': {} attention heads are not a multiple of {} KV heads", name,
         c.n_heads, c.n_kv_heads);
  }
  // Gemma2Config's head_dim defaults to 256, not to hidden_size / heads.
  const bool gemma = c.architecture == "gemma2" || c.architecture == "gemma3";
  const bool head_dim_given = config.contains("head_dim") || gemma;
  if (!head_dim_given && c.dim % c.n_heads != 0) {
    fail(ErrorCode::kCorrupt, "'{}': hidden_size {} is not a multiple of {} heads", name, c.dim,
         c.n_heads);
  }
  c.head_dim = json_int(config, "head_dim", name, gemma ? 256 : c.dim / c.n_heads);
  c.rms_eps = json_float(config, "rms_norm_eps", name, 1e-6f);
  c.tied_embeddings = config.contains("tie_word_embeddings") &&
                      config["tie_word_embeddings"].is_boolean() &&
                      config["tie_word_embeddings"].get<bool>();
  c.rope_theta = json_float(config, "rope_theta", name, 10000.0f);
  if (!gemma && config.contains("hidden_act") && config["hidden_act"] != "silu") {
    fail(ErrorCode::kUnsupported, "'{}': hidden_act {} is not supported ({} runs silu)", name,
         config["hidden_act"].dump(), arch);
  }
  if (json_bool(config, "use_sliding_window", name, false)) {
    fail(ErrorCode::kUnsupported,
         "'{}': use_sliding_window (windowed Qwen2 layers) is not supported", name);
  }
  apply_architecture_facts(c);
  // rapide's gemma2 head is always the embedding (as llama.cpp's): a Gemma 2 that declares
  // its own lm_head would lose it.
  if (c.architecture == "gemma2" && !json_bool(config, "tie_word_embeddings", name, true)) {
    fail(ErrorCode::kUnsupported,
         "'{}': tie_word_embeddings false (a separate lm_head) is not supported for Gemma 2", name);
  }
  // Phi-3, Mistral and Mixtral window every layer when sliding_window is set (null: off), as
  // transformers does; Llama has no window.
  if (c.architecture == "phi3" || arch == "MistralForCausalLM" || arch == "MixtralForCausalLM") {
    c.sliding_window = json_int(config, "sliding_window", name, 0);
    c.window_layers = WindowLayers::kAll;
  }
  if (c.architecture == "gemma2") read_gemma2_config(config, name, c);
  if (c.architecture == "gemma3") read_gemma3_config(config, name, c);
  if (config.contains("partial_rotary_factor") && config["partial_rotary_factor"].is_number()) {
    const double f = config["partial_rotary_factor"].get<double>();
    const int rot = static_cast<int>(std::lround(f * c.head_dim));
    if (!(f > 0.0 && f <= 1.0) || rot % 2 != 0) {
      fail(ErrorCode::kCorrupt, "'{}': partial_rotary_factor {} of head size {}", name, f,
           c.head_dim);
    }
    if (rot != c.head_dim) c.rope_dim = rot;
  }
  if (arch == "MixtralForCausalLM") {
    c.n_experts = json_int(config, "num_local_experts", name);
    c.n_experts_used = json_int(config, "num_experts_per_tok", name);
  }
  if (c.architecture == "qwen2moe") read_qwen2moe_config(config, name, c);
  read_hf_rope_scaling(config, name, c);
  return c;
}

HfTensorTarget gguf_target_for_hf(const std::string& hf, const std::string& architecture,
                                  const std::string& file) {
  static const std::map<std::string, std::string> kTop = {
      {"model.embed_tokens.weight", "token_embd.weight"},
      {"model.norm.weight", "output_norm.weight"},
      {"lm_head.weight", "output.weight"},
  };
  // Within model.layers.N.
  static const std::map<std::string, std::string> kLayer = {
      {"input_layernorm.weight", "attn_norm.weight"},
      {"self_attn.q_proj.weight", "attn_q.weight"},
      {"self_attn.k_proj.weight", "attn_k.weight"},
      {"self_attn.v_proj.weight", "attn_v.weight"},
      {"self_attn.q_proj.bias", "attn_q.bias"},
      {"self_attn.k_proj.bias", "attn_k.bias"},
      {"self_attn.v_proj.bias", "attn_v.bias"},
      {"self_attn.o_proj.weight", "attn_output.weight"},
      {"mlp.gate_proj.weight", "ffn_gate.weight"},
      {"mlp.up_proj.weight", "ffn_up.weight"},
      {"mlp.down_proj.weight", "ffn_down.weight"},
      {"self_attn.qkv_proj.weight", "attn_qkv.weight"},         // Phi-3: rows [Q; K; V]
      {"mlp.gate_up_proj.weight", "ffn_up.weight"},             // Phi-3: rows [gate; up]
      {"block_sparse_moe.gate.weight", "ffn_gate_inp.weight"},  // Mixtral router
      {"mlp.gate.weight", "ffn_gate_inp.weight"},               // Qwen2-MoE router
      {"mlp.shared_expert.gate_proj.weight", "ffn_gate_shexp.weight"},
      {"mlp.shared_expert.up_proj.weight", "ffn_up_shexp.weight"},
      {"mlp.shared_expert.down_proj.weight", "ffn_down_shexp.weight"},
      {"mlp.shared_expert_gate.weight", "ffn_gate_inp_shexp.weight"},
      {"self_attn.q_norm.weight", "attn_q_norm.weight"},  // Qwen3, Gemma 3: per head
      {"self_attn.k_norm.weight", "attn_k_norm.weight"},
  };
  // The norm after attention: Llama's precedes the FFN; Gemma 2 has one on each side.
  static const std::map<std::string, std::string> kNorms = {
      {"post_attention_layernorm.weight", "ffn_norm.weight"}};
  static const std::map<std::string, std::string> kGemma2Norms = {
      {"post_attention_layernorm.weight", "post_attention_norm.weight"},
      {"pre_feedforward_layernorm.weight", "ffn_norm.weight"},
      {"post_feedforward_layernorm.weight", "post_ffw_norm.weight"}};
  // Within model.layers.N, with the expert index taken out of "...experts.E.".
  static const std::map<std::string, std::string> kExperts = {
      {"block_sparse_moe.experts.w1.weight", "ffn_gate_exps.weight"},  // Mixtral
      {"block_sparse_moe.experts.w3.weight", "ffn_up_exps.weight"},
      {"block_sparse_moe.experts.w2.weight", "ffn_down_exps.weight"},
      {"mlp.experts.gate_proj.weight", "ffn_gate_exps.weight"},  // Qwen2-MoE
      {"mlp.experts.up_proj.weight", "ffn_up_exps.weight"},
      {"mlp.experts.down_proj.weight", "ffn_down_exps.weight"},
  };
  if (auto it = kTop.find(hf); it != kTop.end()) return {it->second};
  if (const auto layer = split_at_index(hf, "model.layers."); layer && layer->head.empty()) {
    const std::string block = fmt::format("blk.{}.", layer->index);
    const auto& norms =
        architecture == "gemma2" || architecture == "gemma3" ? kGemma2Norms : kNorms;
    for (const auto* table : {&kLayer, &norms}) {
      if (auto it = table->find(layer->rest); it != table->end()) {
        return {it->second.empty() ? "" : block + it->second};
      }
    }
    if (const auto expert = split_at_index(layer->rest, ".experts.");
        expert && !expert->head.empty()) {
      const auto it = kExperts.find(expert->head + ".experts." + expert->rest);
      if (it != kExperts.end()) return {block + it->second, expert->index};
    }
  }
  // Tensors known not to change the computation (unused_tensors.h) carry nothing.
  if (ignored_tensor_reason("hf", architecture, hf) != nullptr) return {""};
  fail(ErrorCode::kUnsupported,
       "'{}': unexpected tensor '{}': rapide's {} architecture does not use it (refusing "
       "rather than guessing; docs/architectures.md lists what rapide reads)",
       file, hf, architecture);
}

int hf_rope_permute_heads(const ModelConfig& c, const std::string& gguf_name) {
  if (c.architecture != "llama") return 0;
  if (gguf_name.ends_with("attn_q.weight") || gguf_name.ends_with("attn_q.bias")) return c.n_heads;
  if (gguf_name.ends_with("attn_k.weight") || gguf_name.ends_with("attn_k.bias")) {
    return c.n_kv_heads;
  }
  return 0;
}

void permute_rope_rows(const uint8_t* in, uint8_t* out, int64_t rows, int64_t row_bytes,
                       int n_heads) {
  const int64_t head_rows = rows / n_heads, half = head_rows / 2;
  for (int64_t h = 0; h < n_heads; ++h) {
    for (int64_t s = 0; s < 2; ++s) {
      for (int64_t i = 0; i < half; ++i) {
        std::memcpy(out + (h * head_rows + 2 * i + s) * row_bytes,
                    in + (h * head_rows + s * half + i) * row_bytes, row_bytes);
      }
    }
  }
}

ModelFile load_hf(const std::string& dir_path) {
  const fs::path dir(dir_path);
  ModelFile m;
  m.path = dir_path;
  m.format = "hf";
  m.config = config_from_hf_json(read_text_file((dir / "config.json").string()), dir_path);
  if (m.config.name.empty()) m.config.name = dir.parent_path().filename().string();
  const json config = parse_json_file(dir / "config.json");

  std::vector<std::string> shards;
  if (fs::exists(dir / "model.safetensors")) {
    shards.push_back("model.safetensors");
  } else if (fs::exists(dir / "model.safetensors.index.json")) {
    const json index = parse_json_file(dir / "model.safetensors.index.json");
    if (!index.contains("weight_map") || !index["weight_map"].is_object()) {
      fail(ErrorCode::kCorrupt, "'{}': model.safetensors.index.json has no weight_map", dir_path);
    }
    std::set<std::string> files;
    for (const auto& [tensor, shard] : index["weight_map"].items()) {
      if (!shard.is_string() || shard.get<std::string>().find('/') != std::string::npos) {
        fail(ErrorCode::kCorrupt, "'{}': weight_map entry for '{}' is not a file name", dir_path,
             tensor);
      }
      files.insert(shard.get<std::string>());
    }
    shards.assign(files.begin(), files.end());
  } else {
    fail(ErrorCode::kNotFound, "'{}': no model.safetensors or model.safetensors.index.json",
         dir_path);
  }

  const ModelConfig& c = m.config;
  // Expert matrices by stacked GGUF name and expert index, stacked once all shards are read.
  std::map<std::string, std::map<int, SafetensorsTensor>> experts;
  for (const std::string& shard : shards) {
    const SafetensorsFile file = SafetensorsFile::open((dir / shard).string());
    m.storage.push_back(file.owner());
    for (const SafetensorsTensor& t : file.tensors()) {
      HfTensorTarget target = gguf_target_for_hf(t.name, c.architecture, file.path());
      if (target.name.empty()) continue;
      const bool twice = target.expert >= 0 ? !experts[target.name].emplace(target.expert, t).second
                                            : m.find(target.name) != nullptr;
      if (twice) fail(ErrorCode::kCorrupt, "'{}': tensor '{}' appears twice", dir_path, t.name);
      if (target.expert < 0) {
        m.tensors.push_back(adapt_tensor(m, t, std::move(target.name), dir_path));
      }
    }
  }
  for (const auto& [name, parts] : experts) {
    m.tensors.push_back(stack_experts(m, name, parts, dir_path));
  }
  // With tie_word_embeddings, transformers may save either of the two shared tensors (e.g.
  // only lm_head.weight); keep one, as token_embd.weight, like llama.cpp's converter.
  if (c.tied_embeddings) {
    auto output = std::find_if(m.tensors.begin(), m.tensors.end(),
                               [](const TensorView& t) { return t.name == "output.weight"; });
    if (output != m.tensors.end()) {
      if (m.find("token_embd.weight") == nullptr) {
        output->name = "token_embd.weight";
      } else {
        m.tensors.erase(output);
      }
    }
  }
  m.config.tied_embeddings = m.find("output.weight") == nullptr;
  m.config.qkv_bias = m.find("blk.0.attn_q.bias") != nullptr;
  for (auto& [tensor, values] : hf_rope_factors(config, c, dir_path)) {
    auto buffer = std::make_shared<AlignedBuffer<float>>(values.size());
    std::copy(values.begin(), values.end(), buffer->data());
    m.storage.push_back(buffer);
    m.tensors.push_back({tensor,
                         TensorType::kF32,
                         {static_cast<int64_t>(values.size())},
                         reinterpret_cast<const uint8_t*>(buffer->data()),
                         values.size() * sizeof(float)});
  }

  if (fs::exists(dir / "tokenizer.json")) {
    HfTokenizerInputs in;
    in.tokenizer_json = read_text_file((dir / "tokenizer.json").string());
    if (fs::exists(dir / "tokenizer_config.json")) {
      in.tokenizer_config_json = read_text_file((dir / "tokenizer_config.json").string());
    }
    if (fs::exists(dir / "chat_template.jinja")) {
      in.chat_template_file = read_text_file((dir / "chat_template.jinja").string());
    }
    in.vocab_size = c.vocab_size;
    in.config_bos_id = json_token_id(config, "bos_token_id");
    in.config_eos_id = json_token_id(config, "eos_token_id");
    // Only a hint for the pre-tokenizer; json::value would throw for a non-string.
    const auto model_type = config.find("model_type");
    if (model_type != config.end() && model_type->is_string()) {
      in.model_type = model_type->get<std::string>();
    }
    m.tokenizer = parse_hf_tokenizer(in, dir_path);
  }
  check_model(m);
  return m;
}

}  // namespace rapide
