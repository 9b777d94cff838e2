#include "formats/gguf_model.h"

#include <array>
#include <cmath>
#include <filesystem>
#include <limits>

#include "base/error.h"
#include "formats/architecture.h"
#include "formats/known_keys.h"
#include "formats/model_checks.h"

namespace rapide {
namespace {

int to_int(const GgufFile& gguf, const std::string& key, uint32_t value) {
  if (value > static_cast<uint32_t>(std::numeric_limits<int>::max())) {
    fail(ErrorCode::kCorrupt, "'{}': metadata key '{}' value {} is too large", gguf.path(), key,
         value);
  }
  return static_cast<int>(value);
}

int get_int_or(const GgufFile& gguf, const std::string& key, int fallback) {
  if (!gguf.has(key)) return fallback;
  return to_int(gguf, key, gguf.get_u32(key));
}

// Token ids are u32 in GGUF; converters write 0xFFFFFFFF (or -1) for "none".
int32_t token_id(const GgufFile& gguf, const std::string& key, int32_t fallback, size_t n_tokens) {
  if (!gguf.has(key)) return fallback;
  const int64_t id = gguf.get_i64(key);
  if (id == 0xFFFFFFFF || id < 0) return -1;
  if (static_cast<uint64_t>(id) >= n_tokens) {
    fail(ErrorCode::kCorrupt, "'{}': {} = {} is not a token id (the vocabulary has {} tokens)",
         gguf.path(), key, id, n_tokens);
  }
  return static_cast<int32_t>(id);
}

std::string file_stem(const std::string& path) {
  return std::filesystem::path(path).stem().string();
}

// rope.scaling.* as llama.cpp's load_hparams reads them: the type, its factor (a position
// divisor), YaRN's original context, attention factor and DeepSeek's log multiplier, and
// LongRoPE's (the per-frequency factors are tensors, read by the model).
void read_rope_scaling(const GgufFile& gguf, const std::string& p, ModelConfig& c) {
  // As llama.cpp: the type defaults to linear, whose factor is rope.scaling.factor or the
  // pre-2024 rope.scale_linear (neither, or 0: no scaling); "none" never scales.
  const std::string scaling = gguf.get_string_or(p + "rope.scaling.type", "linear");
  const auto factor = [&] {
    float f = gguf.get_f32_or(p + "rope.scaling.factor", 0.0f);
    if (f == 0.0f) f = gguf.get_f32_or(p + "rope.scale_linear", 0.0f);
    return f == 0.0f ? 1.0f : f;
  };
  c.rope_orig_context = get_int_or(gguf, p + "rope.scaling.original_context_length", 0);
  c.yarn_attn_factor = gguf.get_f32_or(p + "rope.scaling.attn_factor", 1.0f);
  c.yarn_log_multiplier = gguf.get_f32_or(p + "rope.scaling.yarn_log_multiplier", 0.0f);
  if (scaling == "none" || scaling == "linear") {
    c.rope_scale = scaling == "none" ? 1.0f : factor();
    c.rope_scaling = c.rope_scale != 1.0f ? RopeScaling::kLinear : RopeScaling::kNone;
  } else if (scaling == "yarn") {
    c.rope_scaling = RopeScaling::kYarn;
    c.rope_scale = factor();
    if (c.rope_orig_context <= 0) {
      fail(ErrorCode::kCorrupt,
           "'{}': YaRN rope scaling without {}rope.scaling."
           "original_context_length",
           gguf.path(), p);
    }
    c.yarn_ext_factor = 1.0f;  // llama.cpp's default for YaRN (no key in GGUF)
  } else if (scaling == "longrope") {
    c.rope_scaling = RopeScaling::kLongRope;
    c.rope_scale = 1.0f;
  } else {
    fail(ErrorCode::kUnsupported,
         "'{}': rope scaling type '{}' is not supported (none, linear, yarn, longrope)",
         gguf.path(), scaling);
  }
}

}  // namespace

RopeStyle rope_style_for_architecture(std::string_view architecture) {
  // llama.cpp's llama_model_rope_type(): architectures that rotate halves of each head.
  static constexpr std::array<std::string_view, 26> kNeox = {
      "falcon",  "grok",    "dbrx",      "bert",    "nomic-bert", "stablelm", "bitnet",
      "qwen",    "qwen2",   "qwen2moe",  "qwen2vl", "qwen3",      "qwen3moe", "olmo2",
      "phi2",    "phi3",    "phimoe",    "gemma",   "gemma2",     "gemma3",   "starcoder2",
      "openelm", "gptneox", "codeshell", "exaone",  "minicpm3"};
  for (std::string_view a : kNeox) {
    if (a == architecture) return RopeStyle::kNeox;
  }
  return RopeStyle::kNormal;
}

ModelConfig config_from_gguf(const GgufFile& gguf) {
  ModelConfig c;
  c.architecture = gguf.get_string_or("general.architecture", "");
  if (c.architecture.empty()) {
    fail(ErrorCode::kCorrupt, "'{}': missing metadata key 'general.architecture'", gguf.path());
  }
  c.name = gguf.get_string_or("general.name", file_stem(gguf.path()));
  // Every key is known before any is trusted (known_keys.h). Other architectures' files are
  // refused by their tensors (model_checks.h), and a vocabulary-only file computes nothing.
  if (is_supported_architecture(c.architecture) && !gguf.tensors().empty()) {
    check_gguf_keys(gguf, c.architecture);
  }
  const std::string p = c.architecture + ".";
  c.dim = get_int_or(gguf, p + "embedding_length", 0);
  c.n_layers = get_int_or(gguf, p + "block_count", 0);
  c.n_heads = get_int_or(gguf, p + "attention.head_count", 0);
  c.n_kv_heads = get_int_or(gguf, p + "attention.head_count_kv", c.n_heads);
  c.ffn_dim = get_int_or(gguf, p + "feed_forward_length", 0);
  c.max_context = get_int_or(gguf, p + "context_length", 0);
  c.rms_eps = gguf.get_f32_or(p + "attention.layer_norm_rms_epsilon", 1e-5f);
  c.rope_theta = gguf.get_f32_or(p + "rope.freq_base", 10000.0f);
  c.rope_style = rope_style_for_architecture(c.architecture);
  if (c.n_heads > 0 && c.n_kv_heads > 0 && c.n_heads % c.n_kv_heads != 0) {
    fail(ErrorCode::kCorrupt, "'{}': {} attention heads are not a multiple of {} KV heads",
         gguf.path(), c.n_heads, c.n_kv_heads);
  }
  if (gguf.has(p + "attention.key_length")) {
    c.head_dim = get_int_or(gguf, p + "attention.key_length", 0);
  } else if (c.n_heads > 0) {
    if (c.dim % c.n_heads != 0) {
      fail(ErrorCode::kCorrupt, "'{}': embedding length {} is not a multiple of {} heads",
           gguf.path(), c.dim, c.n_heads);
    }
    c.head_dim = c.dim / c.n_heads;
  }
  // deepseek2's value head differs from its key head: MLA reads it (architecture.cpp).
  if (c.architecture != "deepseek2" && gguf.has(p + "attention.value_length") &&
      get_int_or(gguf, p + "attention.value_length", 0) != c.head_dim) {
    fail(ErrorCode::kUnsupported,
         "'{}': attention.value_length {} differs from the key head size {} (not supported)",
         gguf.path(), get_int_or(gguf, p + "attention.value_length", 0), c.head_dim);
  }
  if (gguf.has(p + "rope.dimension_count")) {
    const int rope_dim = get_int_or(gguf, p + "rope.dimension_count", 0);
    if (rope_dim <= 0 || rope_dim > c.head_dim || rope_dim % 2 != 0) {
      fail(ErrorCode::kCorrupt,
           "'{}': rope.dimension_count {} must be even and within the head "
           "size {}",
           gguf.path(), rope_dim, c.head_dim);
    }
    if (rope_dim != c.head_dim) c.rope_dim = rope_dim;  // partial rotary
  }
  read_rope_scaling(gguf, p, c);
  if (!(c.rope_scale > 0.0f) || !std::isfinite(c.rope_scale)) {
    fail(ErrorCode::kCorrupt, "'{}': rope scaling factor {} must be positive", gguf.path(),
         c.rope_scale);
  }
  if (!(c.rms_eps > 0.0f) || !(c.rope_theta > 0.0f)) {
    fail(ErrorCode::kCorrupt, "'{}': rms epsilon {} and rope base {} must be positive", gguf.path(),
         c.rms_eps, c.rope_theta);
  }

  if (gguf.has(p + "vocab_size")) {
    c.vocab_size = get_int_or(gguf, p + "vocab_size", 0);
  } else if (const GgufTensorInfo* embd = gguf.find_tensor("token_embd.weight");
             embd != nullptr && embd->shape.size() == 2) {
    c.vocab_size = static_cast<int>(std::min<int64_t>(embd->shape[1], INT32_MAX));
  } else if (const GgufValue* tokens = gguf.find("tokenizer.ggml.tokens");
             tokens != nullptr && tokens->is_array()) {
    c.vocab_size = static_cast<int>(tokens->as_array().items.size());
  }
  describe_architecture(gguf, c);
  return c;
}

TokenizerData tokenizer_from_gguf(const GgufFile& gguf) {
  TokenizerData t;
  const std::string model = gguf.get_string_or("tokenizer.ggml.model", "");
  if (model.empty() || model == "none" || model == "no_vocab") return t;
  if (model == "llama") {
    t.kind = TokenizerKind::kSentencePiece;
  } else if (model == "gpt2") {
    t.kind = TokenizerKind::kByteLevelBpe;
  } else {
    fail(ErrorCode::kUnsupported,
         "'{}': tokenizer.ggml.model '{}' is not supported (only 'llama' and 'gpt2')", gguf.path(),
         model);
  }
  const bool spm = t.kind == TokenizerKind::kSentencePiece;
  t.tokens = gguf.get_string_array("tokenizer.ggml.tokens");
  const size_t n = t.tokens.size();
  if (n == 0) fail(ErrorCode::kCorrupt, "'{}': tokenizer.ggml.tokens is empty", gguf.path());
  if (n > static_cast<size_t>(INT32_MAX)) {
    fail(ErrorCode::kCorrupt, "'{}': {} tokens do not fit 32-bit ids", gguf.path(), n);
  }

  if (gguf.has("tokenizer.ggml.scores")) {
    t.scores = gguf.get_f32_array("tokenizer.ggml.scores");
    if (t.scores.size() != n) {
      fail(ErrorCode::kCorrupt, "'{}': tokenizer.ggml.scores has {} entries for {} tokens",
           gguf.path(), t.scores.size(), n);
    }
  } else {
    t.scores.assign(n, 0.0f);
  }
  t.types.assign(n, TokenType::kNormal);
  if (gguf.has("tokenizer.ggml.token_type")) {
    const std::vector<int32_t> types = gguf.get_i32_array("tokenizer.ggml.token_type");
    if (types.size() != n) {
      fail(ErrorCode::kCorrupt, "'{}': tokenizer.ggml.token_type has {} entries for {} tokens",
           gguf.path(), types.size(), n);
    }
    for (size_t i = 0; i < n; ++i) {
      if (types[i] < 0 || types[i] > static_cast<int32_t>(TokenType::kByte)) {
        fail(ErrorCode::kCorrupt, "'{}': token {} ('{}') has unknown token type {}", gguf.path(), i,
             t.tokens[i], types[i]);
      }
      t.types[i] = static_cast<TokenType>(types[i]);
    }
  }
  if (gguf.has("tokenizer.ggml.merges")) t.merges = gguf.get_string_array("tokenizer.ggml.merges");
  if (!spm && t.merges.empty()) {
    fail(ErrorCode::kCorrupt, "'{}': byte-level BPE vocabulary without tokenizer.ggml.merges",
         gguf.path());
  }
  t.pre = gguf.get_string_or("tokenizer.ggml.pre", "");
  t.model_name = gguf.get_string_or("general.name", "");

  // Defaults as llama.cpp's llama_vocab::load for each tokenizer family.
  t.bos_id = token_id(gguf, "tokenizer.ggml.bos_token_id", spm ? 1 : -1, n);
  t.eos_id = token_id(gguf, "tokenizer.ggml.eos_token_id", spm ? 2 : -1, n);
  t.unk_id = token_id(gguf, "tokenizer.ggml.unknown_token_id", spm ? 0 : -1, n);
  t.pad_id = token_id(gguf, "tokenizer.ggml.padding_token_id", -1, n);
  t.add_bos = gguf.get_bool_or("tokenizer.ggml.add_bos_token", spm);
  t.add_eos = gguf.get_bool_or("tokenizer.ggml.add_eos_token", false);
  t.add_space_prefix = gguf.get_bool_or("tokenizer.ggml.add_space_prefix", spm);
  t.chat_template = gguf.get_string_or("tokenizer.chat_template", "");
  return t;
}

ModelFile model_from_gguf(const GgufFile& gguf) {
  ModelFile m;
  m.path = gguf.path();
  m.format = "gguf";
  m.config = config_from_gguf(gguf);
  m.tokenizer = tokenizer_from_gguf(gguf);
  m.tensors.reserve(gguf.tensors().size());
  for (const GgufTensorInfo& info : gguf.tensors()) {
    m.tensors.push_back({info.name, info.type, info.shape, info.data, info.size_bytes});
  }
  if (gguf.owner()) m.storage.push_back(gguf.owner());
  m.config.tied_embeddings = m.config.tied_embeddings || (m.find("token_embd.weight") != nullptr &&
                                                          m.find("output.weight") == nullptr);
  m.config.qkv_bias = m.find("blk.0.attn_q.bias") != nullptr;
  // Llama 3.1+ (and any architecture llama.cpp builds with rope factors): the tensor divides
  // each frequency's angle.
  m.config.rope_freq_factors = m.find("rope_freqs.weight") != nullptr;
  check_model(m);
  return m;
}

ModelFile load_gguf(const std::string& path) {
  return model_from_gguf(GgufFile::open(path));
}

}  // namespace rapide
