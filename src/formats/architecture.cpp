#include "formats/architecture.h"

#include <array>
#include <cmath>
#include <string>

#include <fmt/format.h>

#include "base/error.h"

namespace rapide {
namespace {

constexpr std::array<std::string_view, 13> kSupported = {
    "llama", "qwen2",   "qwen2moe", "phi3",  "gemma2",   "gemma",    "gemma3",
    "olmo2", "granite", "cohere2",  "qwen3", "qwen3moe", "deepseek2"};

int u32_or(const GgufFile& gguf, const std::string& key, int fallback) {
  if (!gguf.has(key)) return fallback;
  const uint32_t v = gguf.get_u32(key);
  if (v > (1u << 30)) fail(ErrorCode::kCorrupt, "'{}': {} = {} is too large", gguf.path(), key, v);
  return static_cast<int>(v);
}

float required_f32(const GgufFile& gguf, const std::string& key) {
  if (!gguf.has(key))
    fail(ErrorCode::kCorrupt, "'{}': missing metadata key '{}'", gguf.path(), key);
  const float v = gguf.get_f32(key);
  if (!std::isfinite(v))
    fail(ErrorCode::kCorrupt, "'{}': {} = {} is not finite", gguf.path(), key, v);
  return v;
}

// DeepSeek-V2/V3 (llama.cpp's load_hparams for LLM_ARCH_DEEPSEEK2): multi-head latent
// attention and a MoE FFN after leading dense layers. key_length = nope + rope per head,
// value_length the per-head V width; rope.dimension_count the rotated part (mla_rope_dim).
void describe_deepseek2(const GgufFile& gguf, ModelConfig& c) {
  const std::string p = c.architecture + ".";
  // 0 (key absent): the lite layout, one attn_q instead of the q LoRA pair. llama.cpp picks
  // it by layer count (27, DeepSeek-V2-Lite), whose converted files carry no q_lora_rank.
  c.q_lora_rank = u32_or(gguf, p + "attention.q_lora_rank", 0);
  c.kv_lora_rank = u32_or(gguf, p + "attention.kv_lora_rank", 0);
  if (c.kv_lora_rank <= 0) {
    fail(ErrorCode::kCorrupt, "'{}': deepseek2 needs {}attention.kv_lora_rank", gguf.path(), p);
  }
  c.mla_rope_dim = u32_or(gguf, p + "rope.dimension_count", 0);
  c.rope_dim = c.mla_rope_dim;
  c.mla_nope_dim = c.head_dim - c.mla_rope_dim;
  c.mla_v_dim = u32_or(gguf, p + "attention.value_length", c.head_dim);
  if (c.mla_rope_dim <= 0 || c.mla_rope_dim % 2 != 0 || c.mla_nope_dim <= 0 || c.mla_v_dim <= 0) {
    fail(ErrorCode::kCorrupt,
         "'{}': deepseek2 head parts: key_length {}, rope.dimension_count {} (even, smaller "
         "than key_length), value_length {}",
         gguf.path(), c.head_dim, c.mla_rope_dim, c.mla_v_dim);
  }
  c.leading_dense_layers = u32_or(gguf, p + "leading_dense_block_count", 0);
  c.expert_ffn_dim = u32_or(gguf, p + "expert_feed_forward_length", 0);
  c.shared_expert_ffn_dim = c.expert_ffn_dim * u32_or(gguf, p + "expert_shared_count", 0);
  c.normalize_expert_weights = gguf.get_bool_or(p + "expert_weights_norm", false);
  c.expert_weights_scale = gguf.get_f32_or(p + "expert_weights_scale", 1.0f);
  // llama_expert_gating_func_type: 1 softmax, 2 sigmoid; 0 or absent is softmax for
  // deepseek2 (the V2 / V2.5 files written before the key existed).
  const int gating = u32_or(gguf, p + "expert_gating_func", 0);
  if (gating > 2) {
    fail(ErrorCode::kUnsupported,
         "'{}': {}expert_gating_func {} is not supported (1 softmax, "
         "2 sigmoid)",
         gguf.path(), p, gating);
  }
  c.expert_gating = gating == 2 ? ExpertGating::kSigmoid : ExpertGating::kSoftmax;
  // V3's e_score_correction_bias, on every MoE layer when on the first.
  c.expert_selection_bias =
      gguf.find_tensor(fmt::format("blk.{}.exp_probs_b.bias", c.leading_dense_layers)) != nullptr;
}

}  // namespace

bool is_supported_architecture(std::string_view architecture) {
  for (std::string_view a : kSupported) {
    if (a == architecture) return true;
  }
  return false;
}

const char* supported_architectures() {
  static const std::string list = [] {
    std::string s;
    for (std::string_view a : kSupported) s += (s.empty() ? "" : ", ") + std::string(a);
    return s;
  }();
  return list.c_str();
}

void apply_architecture_facts(ModelConfig& c) {
  if (c.architecture == "llama") {
    c.expert_ffn_dim = c.ffn_dim;  // Mixtral's experts have the dense FFN's width
  } else if (c.architecture == "qwen2moe") {
    c.normalize_expert_weights = false;
  } else if (c.architecture == "phi3") {
    c.fused_gate_up = true;
    c.scale_query_first = true;
    c.window_layers = WindowLayers::kAll;
  } else if (c.architecture == "gemma2") {
    c.activation = FfnActivation::kGeluTanh;
    c.post_norms = true;
    c.embedding_scale = std::sqrt(static_cast<float>(c.dim));
    c.window_layers = WindowLayers::kPattern;
    c.window_period = 2;
    c.scale_query_first = true;
    // query_pre_attn_scalar is not stored in GGUF: llama.cpp derives it from the model size,
    // n_embd / n_head for the 46-layer 27B and the head size for the others.
    const int scalar = c.n_layers == 46 && c.n_heads > 0 ? c.dim / c.n_heads : c.head_dim;
    if (scalar > 0) c.query_scale = 1.0f / std::sqrt(static_cast<float>(scalar));
    c.tied_embeddings = true;  // llama.cpp never reads a gemma2 output.weight
  } else if (c.architecture == "deepseek2") {
    c.shared_expert_gated = false;  // ffn_*_shexp: always on, no ffn_gate_inp_shexp
  } else if (c.architecture == "gemma") {
    // Gemma 1: gemma2 without soft-caps, post-norms or windows; Q scaled by 1/sqrt(key_length).
    c.activation = FfnActivation::kGeluTanh;
    c.embedding_scale = std::sqrt(static_cast<float>(c.dim));
    c.scale_query_first = true;
    if (c.head_dim > 0) c.query_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    c.tied_embeddings = true;
  } else if (c.architecture == "gemma3") {
    // Sandwich norms and GeGLU as gemma2, per-head q/k RMSNorm, no soft-caps, five local
    // (windowed, their own rope base, unscaled) layers to one global layer.
    c.activation = FfnActivation::kGeluTanh;
    c.post_norms = true;
    c.qk_norm = QkNorm::kPerHead;
    c.embedding_scale = std::sqrt(static_cast<float>(c.dim));
    c.window_layers = WindowLayers::kPattern;
    c.window_period = 6;
    c.rope_theta_local = 10000.0f;
    c.scale_query_first = true;
    // As for gemma2, llama.cpp derives query_pre_attn_scalar from the model: n_embd / n_head
    // for the 62-layer 27B, the head size for the others (Hugging Face folders carry it).
    const int scalar = c.n_layers == 62 && c.n_heads > 0 ? c.dim / c.n_heads : c.head_dim;
    if (scalar > 0) c.query_scale = 1.0f / std::sqrt(static_cast<float>(scalar));
    c.tied_embeddings = true;
  } else if (c.architecture == "olmo2") {
    c.pre_norms = false;
    c.post_norms = true;
    c.qk_norm = QkNorm::kWhole;
  } else if (c.architecture == "cohere2") {
    c.norm_kind = NormKind::kLayer;
    c.parallel_block = true;
    c.window_layers = WindowLayers::kPattern;
    c.window_period = 4;  // hard-coded in llama.cpp (not a key)
    c.rope_on_global_layers = false;
    c.tied_embeddings = true;
  } else if (c.architecture == "qwen3" || c.architecture == "qwen3moe") {
    c.qk_norm = QkNorm::kPerHead;
  }
}

void describe_architecture(const GgufFile& gguf, ModelConfig& c) {
  const std::string p = c.architecture + ".";
  apply_architecture_facts(c);
  c.n_experts = u32_or(gguf, p + "expert_count", 0);
  c.n_experts_used = u32_or(gguf, p + "expert_used_count", 0);
  if (c.architecture == "qwen2moe") {
    c.expert_ffn_dim = u32_or(gguf, p + "expert_feed_forward_length",
                              c.n_experts_used > 0 ? c.ffn_dim / c.n_experts_used : 0);
    c.shared_expert_ffn_dim = u32_or(gguf, p + "expert_shared_feed_forward_length", c.ffn_dim);
  } else if (c.architecture == "phi3") {
    c.fused_qkv = gguf.find_tensor("blk.0.attn_qkv.weight") != nullptr;
    c.sliding_window = u32_or(gguf, p + "attention.sliding_window", 0);
  } else if (c.architecture == "llama") {
    // Mistral-style: every layer windowed when the file says so. llama.cpp's converter does
    // not write the key for Mistral (nor does llama.cpp read it), so its files run unwindowed
    // here as there; a file that carries it gets the model's own attention.
    c.sliding_window = u32_or(gguf, p + "attention.sliding_window", 0);
    c.window_layers = WindowLayers::kAll;
  } else if (c.architecture == "gemma3") {
    c.sliding_window = u32_or(gguf, p + "attention.sliding_window", 0);
    if (c.sliding_window <= 0) {
      fail(ErrorCode::kCorrupt, "'{}': gemma3 needs {}attention.sliding_window", gguf.path(), p);
    }
  } else if (c.architecture == "cohere2") {
    c.sliding_window = u32_or(gguf, p + "attention.sliding_window", 0);
    if (c.sliding_window <= 0) {
      fail(ErrorCode::kCorrupt, "'{}': cohere2 needs {}attention.sliding_window", gguf.path(), p);
    }
    c.rms_eps = required_f32(gguf, p + "attention.layer_norm_epsilon");
    c.logit_scale = required_f32(gguf, p + "logit_scale");
  } else if (c.architecture == "granite") {
    // All four multipliers are required by llama.cpp's loader; so here.
    c.embedding_scale = required_f32(gguf, p + "embedding_scale");
    c.residual_scale = required_f32(gguf, p + "residual_scale");
    c.query_scale = required_f32(gguf, p + "attention.scale");
    const float logit_scale = required_f32(gguf, p + "logit_scale");
    if (!(logit_scale != 0.0f)) {
      fail(ErrorCode::kCorrupt, "'{}': {}logit_scale is 0", gguf.path(), p);
    }
    c.logit_scale = 1.0f / logit_scale;  // Granite divides its logits
  } else if (c.architecture == "qwen3moe") {
    c.expert_ffn_dim = u32_or(gguf, p + "expert_feed_forward_length", 0);
    // llama.cpp's qwen3moe always renormalises the chosen experts' weights.
    c.normalize_expert_weights = true;
  } else if (c.architecture == "gemma2") {
    // llama.cpp's defaults are Gemma 2's published values; files written by its converter
    // always carry the keys.
    c.attn_softcap = gguf.get_f32_or(p + "attn_logit_softcapping", 50.0f);
    c.final_softcap = gguf.get_f32_or(p + "final_logit_softcapping", 30.0f);
    c.sliding_window = u32_or(gguf, p + "attention.sliding_window", 4096);
  } else if (c.architecture == "deepseek2") {
    describe_deepseek2(gguf, c);
  }
}

}  // namespace rapide
