#include "formats/known_keys.h"

#include <algorithm>
#include <string>

#include "base/error.h"
#include "formats/architecture.h"
#include "formats/architecture_list.h"

namespace rapide {
namespace {

// Every `<arch>.*` key rapide knows, one row per key suffix.
//
// How a new architecture adds its keys: append its GGUF name to the `architectures` of
// each row whose key it reads (rows marked "*" are read by the common code of
// config_from_gguf for every architecture, so they need nothing), add a row for each key of
// its own (kRead when config_from_gguf / describe_architecture reads it into ModelConfig and
// refuses the values rapide does not compute; kNoEffect only with a reason that proves the
// computation does not depend on it), and add the rows to docs/architectures.md. A key that
// appears in no row stays refused: a key whose effect rapide does not compute must stop
// the load rather than be skipped.
constexpr KnownKey kKnownKeys[] = {
    // The shape, read for every architecture by config_from_gguf.
    {"embedding_length", "*", KeyUse::kRead, "model width (dim)"},
    {"block_count", "*", KeyUse::kRead, "layer count"},
    {"feed_forward_length", "*", KeyUse::kRead, "FFN width"},
    {"attention.head_count", "*", KeyUse::kRead, "query heads"},
    {"attention.head_count_kv", "*", KeyUse::kRead, "key/value heads (default: head_count)"},
    {"attention.key_length", "*", KeyUse::kRead, "head size (default: dim / heads)"},
    {"attention.value_length", "*", KeyUse::kRead,
     "value head size: must equal the key head size (refused otherwise), except deepseek2's "
     "V head (mla_v_dim)"},
    {"attention.layer_norm_rms_epsilon", "*", KeyUse::kRead, "RMSNorm epsilon (default 1e-5)"},
    {"context_length", "*", KeyUse::kRead,
     "trained context: the default and largest context rapide serves; does not change the "
     "logits at any position within it"},
    {"vocab_size", "*", KeyUse::kRead,
     "vocabulary size (default: token_embd rows); checked against the tensors"},
    // Rotary embeddings (model/rope.h).
    {"rope.freq_base", "*", KeyUse::kRead, "rope base theta (default 10000)"},
    {"rope.dimension_count", "*", KeyUse::kRead,
     "rotated dimensions per head (partial rotary when below the head size; deepseek2: the "
     "rope part of each head)"},
    {"rope.scaling.type", "*", KeyUse::kRead,
     "linear (llama.cpp's default), none, yarn or longrope; other types are refused"},
    {"rope.scaling.factor", "*", KeyUse::kRead,
     "linear or YaRN factor (positions divided by it); with type none llama.cpp never "
     "scales, whatever the factor"},
    {"rope.scale_linear", "*", KeyUse::kRead, "the pre-2024 name of the linear factor"},
    {"rope.scaling.finetuned", "*", KeyUse::kNoEffect,
     "llama.cpp stores it (rope_finetuned) and no computation reads it"},
    {"rope.scaling.original_context_length", "*", KeyUse::kRead,
     "YaRN's correction range and LongRoPE's choice of factor set"},
    {"rope.scaling.attn_factor", "*", KeyUse::kRead,
     "magnitude of the rotated values (ggml's attn_factor; YaRN and LongRoPE)"},
    {"rope.scaling.yarn_log_multiplier", "deepseek2", KeyUse::kRead,
     "DeepSeek's YaRN mscale: scores times (1 + m ln factor)^2"},
    // Mixture of experts.
    {"expert_count", "llama qwen2moe qwen3moe deepseek2", KeyUse::kRead,
     "experts per MoE layer (0: dense)"},
    {"expert_used_count", "llama qwen2moe qwen3moe deepseek2", KeyUse::kRead,
     "experts each token is routed to"},
    {"expert_feed_forward_length", "qwen2moe qwen3moe deepseek2", KeyUse::kRead,
     "routed expert FFN width"},
    {"expert_shared_feed_forward_length", "qwen2moe", KeyUse::kRead, "shared expert FFN width"},
    {"expert_shared_count", "deepseek2", KeyUse::kRead,
     "shared experts, run as one ungated FFN of count x expert width"},
    {"expert_gating_func", "deepseek2", KeyUse::kRead,
     "1 softmax, 2 sigmoid (DeepSeek-V3); others refused"},
    {"expert_weights_norm", "deepseek2", KeyUse::kRead, "routed weights renormalised to sum 1"},
    {"expert_weights_scale", "deepseek2", KeyUse::kRead, "routed weights times this"},
    {"leading_dense_block_count", "deepseek2", KeyUse::kRead, "the first layers have a dense FFN"},
    // Multi-head latent attention.
    {"attention.q_lora_rank", "deepseek2", KeyUse::kRead, "query down-projection rank (0: attn_q)"},
    {"attention.kv_lora_rank", "deepseek2", KeyUse::kRead,
     "the latent a position caches (kv_c width)"},
    // Attention variants and multipliers.
    {"attention.sliding_window", "llama phi3 gemma2 gemma3 cohere2", KeyUse::kRead,
     "window size (llama, phi3: every layer; gemma2: even layers; gemma3: 5 of 6; cohere2: 3 "
     "of 4)"},
    {"attn_logit_softcapping", "gemma2", KeyUse::kRead, "attention score soft-cap"},
    {"final_logit_softcapping", "gemma2", KeyUse::kRead, "output logit soft-cap"},
    {"attention.layer_norm_epsilon", "cohere2", KeyUse::kRead, "LayerNorm epsilon"},
    {"logit_scale", "cohere2 granite", KeyUse::kRead,
     "logits times it (cohere2) or divided by it (granite)"},
    {"attention.scale", "granite", KeyUse::kRead, "softmax scale instead of 1/sqrt(head size)"},
    {"embedding_scale", "granite", KeyUse::kRead, "embeddings times it"},
    {"residual_scale", "granite", KeyUse::kRead, "each block's output times it before the add"},
    // Provenance.
    {"tensor_data_layout", "llama", KeyUse::kNoEffect,
     "the layout of the checkpoint an early convert.py started from; llama.cpp never reads "
     "it, and GGUF tensors are always in GGUF's layout"},
};

}  // namespace

std::span<const KnownKey> known_gguf_keys() {
  return kKnownKeys;
}

const KnownKey* find_known_key(std::string_view architecture, std::string_view suffix) {
  for (const KnownKey& k : kKnownKeys) {
    if (k.suffix == suffix && architecture_listed(k.architectures, architecture)) return &k;
  }
  return nullptr;
}

void check_gguf_keys(const GgufFile& gguf, std::string_view architecture) {
  for (const GgufKeyValue& kv : gguf.metadata()) {
    const std::string_view key = kv.key;
    const size_t dot = key.find('.');
    const std::string_view ns = key.substr(0, dot);
    if (ns == "general" || ns == "tokenizer") continue;
    if (ns == architecture) {
      const std::string_view suffix =
          dot == std::string_view::npos ? std::string_view() : key.substr(dot + 1);
      if (find_known_key(architecture, suffix) != nullptr) continue;
      fail(ErrorCode::kUnsupported,
           "'{}': metadata key '{}' is not known to rapide's {} architecture and could change "
           "the results (refusing rather than guessing; docs/architectures.md lists the keys "
           "rapide reads)",
           gguf.path(), key, architecture);
    }
    if (ns == "split") {
      if (key == "split.count" && gguf.get_u64(key) > 1) {
        fail(ErrorCode::kUnsupported,
             "'{}': split.count = {}: this is one part of a split GGUF and rapide reads whole "
             "files (merge the parts with llama-gguf-split --merge)",
             gguf.path(), gguf.get_u64(key));
      }
      continue;
    }
    if (is_supported_architecture(ns)) {
      fail(ErrorCode::kUnsupported,
           "'{}': metadata key '{}' belongs to architecture {}, but the file is {} (refusing "
           "rather than guessing which one it computes)",
           gguf.path(), key, ns, architecture);
    }
  }
}

}  // namespace rapide
