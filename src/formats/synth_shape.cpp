#include "formats/synth_shape.h"

#include <algorithm>
#include <charconv>
#include <vector>

#include "base/error.h"

namespace rapide {
namespace {

// synth100m (apps/rapide/cmd_synth.cpp has always written this shape for llama).
constexpr LlamaShape kSynth100m{
    .dim = 768, .layers = 12, .heads = 12, .kv_heads = 4, .ffn = 2048, .ctx = 2048};

struct Field {
  const char* key;
  int* value;
  bool zero_ok = false;
};

// The keys `arch` accepts, pointing into `s`.
std::vector<Field> fields_of(SynthArch arch, SynthShape& s) {
  std::vector<Field> f = {{"dim", &s.base.dim},
                          {"layers", &s.base.layers},
                          {"heads", &s.base.heads},
                          {"ffn", &s.base.ffn},
                          {"ctx", &s.base.ctx}};
  if (arch != SynthArch::kDeepseek2) f.push_back({"kv_heads", &s.base.kv_heads});
  if (arch == SynthArch::kQwen3 || arch == SynthArch::kGemma3) {
    f.push_back({"head_dim", &s.head_dim});
  }
  if (arch == SynthArch::kGemma3) {
    f.push_back({"window", &s.window});
    f.push_back({"rope_scale", &s.rope_scale});
  }
  if (arch == SynthArch::kDeepseek2) {
    f.insert(f.end(), {{"q_lora", &s.q_lora_rank},
                       {"kv_lora", &s.kv_lora_rank},
                       {"nope", &s.nope_dim},
                       {"rope", &s.rope_dim},
                       {"v_dim", &s.v_dim},
                       {"experts", &s.experts},
                       {"experts_used", &s.experts_used},
                       {"expert_ffn", &s.expert_ffn},
                       {"shared_experts", &s.shared_experts, true},
                       {"dense_layers", &s.dense_layers, true}});
  }
  return f;
}

std::string key_list(const std::vector<Field>& fields) {
  std::string keys;
  for (const Field& f : fields) keys += (keys.empty() ? "" : ", ") + std::string(f.key);
  return keys;
}

void check(bool ok, const std::string& option, const std::string& arch, const char* what) {
  if (!ok) fail(ErrorCode::kInvalidArgument, "{} ({}): {}", option, arch, what);
}

}  // namespace

std::optional<SynthArch> synth_arch_from_name(std::string_view name) {
  for (SynthArch a :
       {SynthArch::kLlama, SynthArch::kQwen3, SynthArch::kGemma3, SynthArch::kDeepseek2}) {
    if (name == synth_arch_name(a)) return a;
  }
  return std::nullopt;
}

const char* synth_arch_name(SynthArch arch) {
  switch (arch) {
    case SynthArch::kLlama:
      return "llama";
    case SynthArch::kQwen3:
      return "qwen3";
    case SynthArch::kGemma3:
      return "gemma3";
    case SynthArch::kDeepseek2:
      return "deepseek2";
  }
  return "?";
}

int SynthShape::key_dim() const {
  if (arch == SynthArch::kDeepseek2) return nope_dim + rope_dim;
  return head_dim > 0 ? head_dim : base.dim / base.heads;
}

int SynthShape::value_dim() const {
  return arch == SynthArch::kDeepseek2 ? v_dim : key_dim();
}

int64_t SynthShape::kv_values_per_position() const {
  if (arch == SynthArch::kDeepseek2) {
    return static_cast<int64_t>(base.layers) * (kv_lora_rank + rope_dim);
  }
  return static_cast<int64_t>(base.layers) * base.kv_heads * (key_dim() + value_dim());
}

int64_t SynthShape::expanded_kv_values_per_position() const {
  if (arch != SynthArch::kDeepseek2) return kv_values_per_position();
  return static_cast<int64_t>(base.layers) * base.heads * (key_dim() + value_dim());
}

SynthShape default_synth_shape(SynthArch arch) {
  SynthShape s;
  s.arch = arch;
  s.base = kSynth100m;
  if (arch == SynthArch::kLlama) return s;
  s.base.rms_eps = 1e-6f;
  s.base.rope_base = 1e6f;
  s.head_dim = 64;
  if (arch == SynthArch::kGemma3) s.window = 512;
  if (arch == SynthArch::kDeepseek2) {
    s.base.kv_heads = s.base.heads;
    s.base.ctx = 4096;
    s.base.rope_base = 1e4f;
    s.head_dim = 0;
    s.q_lora_rank = 256;
    s.kv_lora_rank = 256;
    s.nope_dim = 128;
    s.rope_dim = 64;
    s.v_dim = 128;
    s.experts = 8;
    s.experts_used = 2;
    s.expert_ffn = 512;
    s.shared_experts = 1;
    s.dense_layers = 1;
  }
  return s;
}

SynthShape parse_synth_shape(SynthArch arch, const std::string& text, const std::string& option) {
  SynthShape s = default_synth_shape(arch);
  if (text == "synth100m") return s;
  if (arch == SynthArch::kLlama) {
    // The llama keys and checks are parse_llama_shape's (`rapide distill` shares them).
    s.base = parse_llama_shape(text, s.base, option);
    return s;
  }
  const std::string name = synth_arch_name(arch);
  const bool explicit_head_dim = text.find("head_dim=") != std::string::npos;
  std::vector<Field> fields = fields_of(arch, s);
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, end - start);
    const size_t eq = item.find('=');
    const std::string key = eq == std::string::npos ? "" : item.substr(0, eq);
    auto it =
        std::find_if(fields.begin(), fields.end(), [&](const Field& f) { return key == f.key; });
    int value = -1;
    const char* last = item.data() + item.size();
    if (it == fields.end() || std::from_chars(item.data() + eq + 1, last, value).ptr != last ||
        value < (it->zero_ok ? 0 : 1)) {
      fail(ErrorCode::kInvalidArgument,
           "{}: '{}' is not key=positive-integer with key one of {} (--arch {})", option, item,
           key_list(fields), name);
    }
    *it->value = value;
    start = end + 1;
  }
  const LlamaShape& b = s.base;
  if (arch == SynthArch::kDeepseek2) {
    s.base.kv_heads = b.heads;
    check(s.rope_dim % 2 == 0, option, name, "rope must be even");
    check(s.experts_used <= s.experts, option, name, "experts_used must not exceed experts");
    check(s.dense_layers <= b.layers, option, name, "dense_layers must not exceed layers");
  } else {
    // A changed dim or heads without head_dim keeps heads of dim / heads, as llama.
    if (!explicit_head_dim) {
      check(b.dim % b.heads == 0, option, name, "heads must divide dim (or give head_dim)");
      s.head_dim = b.dim / b.heads;
    }
    check(s.head_dim % 2 == 0, option, name, "the head size must be even");
    check(b.heads % b.kv_heads == 0, option, name, "kv_heads must divide heads");
  }
  return s;
}

}  // namespace rapide
