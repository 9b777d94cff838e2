#include "formats/hf_loader.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <regex>
#include <set>

#include "base/aligned_buffer.h"
#include "base/error.h"
#include "base/mapped_file.h"
#include "formats/architecture.h"
#include "formats/hf_tokenizer.h"
#include "formats/model_checks.h"
#include "formats/model_json.h"
#include "formats/safetensors_reader.h"

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

}  // namespace

ModelConfig config_from_hf_json(const std::string& config_json, const std::string& name) {
  const json config = parse_model_json(config_json, fmt::format("'{}': config.json", name));
  if (!config.is_object()) fail(ErrorCode::kCorrupt, "'{}': config.json is not an object", name);
  std::string arch;
  if (config.contains("architectures") && config["architectures"].is_array() &&
      !config["architectures"].empty() && config["architectures"][0].is_string()) {
    arch = config["architectures"][0].get<std::string>();
  }
  ModelConfig c;
  if (arch == "LlamaForCausalLM" || arch == "MistralForCausalLM") {
    c.architecture = "llama";
    c.rope_style = RopeStyle::kNormal;  // after the Q/K permutation below
  } else if (arch == "Qwen2ForCausalLM") {
    c.architecture = "qwen2";
    c.rope_style = RopeStyle::kNeox;
  } else if (arch == "Phi3ForCausalLM") {
    c.architecture = "phi3";
    c.rope_style = RopeStyle::kNeox;
    c.fused_qkv = true;  // qkv_proj; gate_up_proj is fused too (architecture.h)
    if (config.contains("partial_rotary_factor") && config["partial_rotary_factor"].is_number() &&
        config["partial_rotary_factor"].get<double>() != 1.0) {
      fail(ErrorCode::kUnsupported, "'{}': partial rotary embeddings are not supported", name);
    }
  } else {
    fail(ErrorCode::kUnsupported,
         "'{}': architecture '{}' is not supported (LlamaForCausalLM, MistralForCausalLM, "
         "Qwen2ForCausalLM, Phi3ForCausalLM)",
         name, arch.empty() ? "(none)" : arch);
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
  if (!config.contains("head_dim") && c.dim % c.n_heads != 0) {
    fail(ErrorCode::kCorrupt, "'{}': hidden_size {} is not a multiple of {} heads", name, c.dim,
         c.n_heads);
  }
  c.head_dim = json_int(config, "head_dim", name, c.dim / c.n_heads);
  c.rms_eps = json_float(config, "rms_norm_eps", name, 1e-6f);
  c.tied_embeddings = config.contains("tie_word_embeddings") &&
                      config["tie_word_embeddings"].is_boolean() &&
                      config["tie_word_embeddings"].get<bool>();
  c.rope_theta = json_float(config, "rope_theta", name, 10000.0f);
  apply_architecture_facts(c);
  // Phi-3 windows every layer; a Mistral-style llama window is ignored, as llama.cpp does.
  if (c.architecture == "phi3") c.sliding_window = json_int(config, "sliding_window", name, 0);
  if (config.contains("rope_scaling") && !config["rope_scaling"].is_null()) {
    const json& s = config["rope_scaling"];
    std::string type;
    if (s.is_object()) {
      if (s.contains("rope_type") && s["rope_type"].is_string()) {
        type = s["rope_type"].get<std::string>();
      } else if (s.contains("type") && s["type"].is_string()) {
        type = s["type"].get<std::string>();
      }
    }
    if (type == "linear") {
      c.rope_scale = json_float(s, "factor", name, 0.0f);
      if (!(c.rope_scale > 0.0f)) {
        fail(ErrorCode::kCorrupt, "'{}': linear rope_scaling needs a positive factor", name);
      }
    } else if (type != "default") {
      fail(ErrorCode::kUnsupported, "'{}': rope_scaling type '{}' is not supported (only linear)",
           name, type);
    }
  }
  return c;
}

std::string gguf_name_for_hf(const std::string& hf, const std::string& file) {
  static const std::map<std::string, std::string> kTop = {
      {"model.embed_tokens.weight", "token_embd.weight"},
      {"model.norm.weight", "output_norm.weight"},
      {"lm_head.weight", "output.weight"},
  };
  static const std::map<std::string, std::string> kLayer = {
      {"input_layernorm.weight", "attn_norm.weight"},
      {"post_attention_layernorm.weight", "ffn_norm.weight"},
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
      {"self_attn.qkv_proj.weight", "attn_qkv.weight"},  // Phi-3: rows [Q; K; V]
      {"mlp.gate_up_proj.weight", "ffn_up.weight"},      // Phi-3: rows [gate; up]
      {"self_attn.rotary_emb.inv_freq", ""},
  };
  if (auto it = kTop.find(hf); it != kTop.end()) return it->second;
  static const std::regex kLayerName(R"(model\.layers\.(\d{1,6})\.(.+))");
  std::smatch match;
  if (std::regex_match(hf, match, kLayerName)) {
    if (auto it = kLayer.find(match[2].str()); it != kLayer.end()) {
      return it->second.empty() ? "" : "blk." + match[1].str() + "." + it->second;
    }
  }
  fail(ErrorCode::kUnsupported, "'{}': unexpected tensor '{}' for a Llama/Qwen2/Phi-3 model", file,
       hf);
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
  const bool permute = c.architecture == "llama";
  for (const std::string& shard : shards) {
    const SafetensorsFile file = SafetensorsFile::open((dir / shard).string());
    m.storage.push_back(file.owner());
    for (const SafetensorsTensor& t : file.tensors()) {
      std::string name = gguf_name_for_hf(t.name, file.path());
      if (name.empty()) continue;
      if (m.find(name) != nullptr) {
        fail(ErrorCode::kCorrupt, "'{}': tensor '{}' appears twice", dir_path, t.name);
      }
      TensorView view{name, t.type, std::vector<int64_t>(t.shape.rbegin(), t.shape.rend()),
                      aligned_view(m, t), t.size_bytes};
      const bool is_q = name.ends_with("attn_q.weight") || name.ends_with("attn_q.bias");
      const bool is_k = name.ends_with("attn_k.weight") || name.ends_with("attn_k.bias");
      if (permute && (is_q || is_k)) {
        const int heads = is_q ? c.n_heads : c.n_kv_heads;
        const int64_t rows = t.shape[0];
        if (rows % (2 * heads) != 0) {
          fail(ErrorCode::kCorrupt, "'{}': tensor '{}' has {} rows, not a multiple of 2 x {} heads",
               dir_path, t.name, rows, heads);
        }
        auto copy = std::make_shared<AlignedBuffer<uint8_t>>(t.size_bytes);
        permute_rope_rows(view.data, copy->data(), rows, static_cast<int64_t>(t.size_bytes) / rows,
                          heads);
        m.storage.push_back(copy);
        view.data = copy->data();
      }
      m.tensors.push_back(std::move(view));
    }
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
    in.model_type = config.value("model_type", "");
    m.tokenizer = parse_hf_tokenizer(in, dir_path);
  }
  check_model(m);
  return m;
}

}  // namespace rapide
