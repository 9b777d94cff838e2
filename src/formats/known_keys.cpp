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
// appears in no row stays refused, which is the safe default for a key that changes the
// math and is not implemented yet.
constexpr KnownKey kKnownKeys[] = {
    // The shape, read for every architecture by config_from_gguf.
    {"embedding_length", "*", KeyUse::kRead, "model width (dim)"},
    {"block_count", "*", KeyUse::kRead, "layer count"},
    {"feed_forward_length", "*", KeyUse::kRead, "FFN width"},
    {"attention.head_count", "*", KeyUse::kRead, "query heads"},
    {"attention.head_count_kv", "*", KeyUse::kRead, "key/value heads (default: head_count)"},
    {"attention.key_length", "*", KeyUse::kRead, "head size (default: dim / heads)"},
    {"attention.value_length", "*", KeyUse::kRead,
     "value head size: must equal the key head size (refused otherwise)"},
    {"attention.layer_norm_rms_epsilon", "*", KeyUse::kRead, "RMSNorm epsilon (default 1e-5)"},
    {"context_length", "*", KeyUse::kRead,
     "trained context: the default and largest context rapide serves; does not change the "
     "logits at any position within it"},
    {"vocab_size", "*", KeyUse::kRead,
     "vocabulary size (default: token_embd rows); checked against the tensors"},
    // Rotary embeddings.
    {"rope.freq_base", "*", KeyUse::kRead, "rope base theta (default 10000)"},
    {"rope.dimension_count", "*", KeyUse::kRead,
     "rotated dimensions per head: must equal the head size (partial rotary is refused)"},
    {"rope.scaling.type", "*", KeyUse::kRead,
     "none or linear (llama.cpp's default); yarn, longrope and other types are refused"},
    {"rope.scaling.factor", "*", KeyUse::kRead,
     "linear scaling factor (positions divided by it); with type none llama.cpp never "
     "scales, whatever the factor"},
    {"rope.scale_linear", "*", KeyUse::kRead, "the pre-2024 name of the linear factor"},
    {"rope.scaling.finetuned", "*", KeyUse::kNoEffect,
     "llama.cpp stores it (rope_finetuned) and no computation reads it"},
    {"rope.scaling.original_context_length", "*", KeyUse::kNoEffect,
     "only YaRN and LongRoPE read it (their correction range, their choice of factors); "
     "both are refused (rope.scaling.type, rope_factors_* tensors)"},
    // Mixture of experts.
    {"expert_count", "llama qwen2moe", KeyUse::kRead, "experts per MoE layer (0: dense)"},
    {"expert_used_count", "llama qwen2moe", KeyUse::kRead, "experts each token is routed to"},
    {"expert_feed_forward_length", "qwen2moe", KeyUse::kRead, "routed expert FFN width"},
    {"expert_shared_feed_forward_length", "qwen2moe", KeyUse::kRead, "shared expert FFN width"},
    // Attention variants.
    {"attention.sliding_window", "llama phi3 gemma2", KeyUse::kRead,
     "window size (llama, phi3: every layer; gemma2: even layers)"},
    {"attn_logit_softcapping", "gemma2", KeyUse::kRead, "attention score soft-cap"},
    {"final_logit_softcapping", "gemma2", KeyUse::kRead, "output logit soft-cap"},
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
