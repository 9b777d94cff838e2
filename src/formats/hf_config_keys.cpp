#include "formats/hf_config_keys.h"

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "formats/architecture_list.h"

namespace rapide {
namespace {

// Every config.json key rapide knows. A new class adds its name to the rows it reads ("*"
// rows are read for every class by config_from_hf_json's common code) and rows of its own;
// kNoEffect needs a reason that proves the logits do not depend on the key. Keys in no row
// are refused.
constexpr HfConfigKey kHfConfigKeys[] = {
    // Shape and numerics, read for every class.
    {"architectures", "*", KeyUse::kRead, "the transformers class, mapped to a GGUF architecture"},
    {"hidden_size", "*", KeyUse::kRead, "model width"},
    {"intermediate_size", "*", KeyUse::kRead, "FFN width"},
    {"num_hidden_layers", "*", KeyUse::kRead, "layer count"},
    {"num_attention_heads", "*", KeyUse::kRead, "query heads"},
    {"num_key_value_heads", "*", KeyUse::kRead, "key/value heads"},
    {"head_dim", "*", KeyUse::kRead, "head size"},
    {"vocab_size", "*", KeyUse::kRead, "vocabulary size"},
    {"max_position_embeddings", "*", KeyUse::kRead, "trained context (as GGUF context_length)"},
    {"rms_norm_eps", "*", KeyUse::kRead, "RMSNorm epsilon"},
    {"rope_theta", "*", KeyUse::kRead, "rope base"},
    {"rope_scaling", "*", KeyUse::kRead,
     "null, default, linear, llama3 (factors as rope_freqs.weight), yarn or longrope (factor "
     "sets as tensors); dynamic and others, and unknown fields inside, are refused"},
    {"partial_rotary_factor", "*", KeyUse::kRead, "the rotated fraction of each head"},
    {"tie_word_embeddings", "*", KeyUse::kRead,
     "output head shares the embedding (Gemma 2: must not be false)"},
    {"hidden_act",
     "LlamaForCausalLM MistralForCausalLM MixtralForCausalLM Qwen2ForCausalLM "
     "Qwen2MoeForCausalLM Phi3ForCausalLM Qwen3ForCausalLM",
     KeyUse::kRead, "must be silu (refused otherwise)"},
    {"bos_token_id", "*", KeyUse::kRead, "tokenizer hint (special token ids)"},
    {"eos_token_id", "*", KeyUse::kRead, "tokenizer hint (special token ids)"},
    {"model_type", "*", KeyUse::kRead, "tokenizer hint (pre-tokenizer choice)"},
    // Keys that do not change the logits, for every class.
    {"pad_token_id", "*", KeyUse::kNoEffect, "padding id for batched training"},
    {"transformers_version", "*", KeyUse::kNoEffect, "provenance"},
    {"_name_or_path", "*", KeyUse::kNoEffect, "provenance"},
    {"torch_dtype", "*", KeyUse::kNoEffect,
     "the dtype transformers computes in; rapide computes in F32 from the stored weights, "
     "as llama.cpp does from a converted file"},
    {"dtype", "*", KeyUse::kNoEffect, "newer transformers' name for torch_dtype"},
    {"use_cache", "*", KeyUse::kNoEffect, "whether transformers keeps a KV cache"},
    {"initializer_range", "*", KeyUse::kNoEffect, "initialisation of untrained weights"},
    {"attention_dropout", "*", KeyUse::kNoEffect, "dropout: training only"},
    {"attention_bias", "*", KeyUse::kNoEffect,
     "the bias tensors decide: q/k/v biases are read, any other bias is refused by name"},
    {"mlp_bias", "*", KeyUse::kNoEffect,
     "the bias tensors decide: FFN biases have no mapping and are refused by name"},
    {"pretraining_tp", "*", KeyUse::kNoEffect,
     "splits transformers' Llama matmuls into slices whose sum is the same product"},
    {"auto_map", "*", KeyUse::kNoEffect,
     "names remote code for transformers' Auto classes; rapide computes the `architectures` "
     "class as transformers defines it"},
    {"output_attentions", "*", KeyUse::kNoEffect, "what transformers returns, not the logits"},
    {"output_hidden_states", "*", KeyUse::kNoEffect, "what transformers returns"},
    {"return_dict", "*", KeyUse::kNoEffect, "what transformers returns"},
    {"use_return_dict", "*", KeyUse::kNoEffect, "what transformers returns"},
    {"torchscript", "*", KeyUse::kNoEffect, "export setting"},
    {"id2label", "*", KeyUse::kNoEffect, "classification heads' labels"},
    {"label2id", "*", KeyUse::kNoEffect, "classification heads' labels"},
    {"problem_type", "*", KeyUse::kNoEffect, "classification heads' loss"},
    {"tokenizer_class", "*", KeyUse::kNoEffect, "the tokenizer comes from tokenizer.json"},
    {"is_decoder", "*", KeyUse::kNoEffect, "encoder-decoder setting of PretrainedConfig"},
    {"is_encoder_decoder", "*", KeyUse::kNoEffect, "encoder-decoder setting"},
    {"add_cross_attention", "*", KeyUse::kNoEffect, "encoder-decoder setting"},
    {"decoder_start_token_id", "*", KeyUse::kNoEffect, "encoder-decoder setting"},
    {"sep_token_id", "*", KeyUse::kNoEffect, "tokenizer hint rapide does not need"},
    {"unk_token_id", "*", KeyUse::kNoEffect, "the tokenizer comes from tokenizer.json"},
    // Generation defaults (old config.json files carry all of them): sampling settings,
    // not the logits; rapide's requests bring their own.
    {"max_length", "*", KeyUse::kNoEffect, "generation default"},
    {"min_length", "*", KeyUse::kNoEffect, "generation default"},
    {"do_sample", "*", KeyUse::kNoEffect, "generation default"},
    {"early_stopping", "*", KeyUse::kNoEffect, "generation default"},
    {"num_beams", "*", KeyUse::kNoEffect, "generation default"},
    {"num_return_sequences", "*", KeyUse::kNoEffect, "generation default"},
    {"temperature", "*", KeyUse::kNoEffect, "generation default"},
    {"top_k", "*", KeyUse::kNoEffect, "generation default"},
    {"top_p", "*", KeyUse::kNoEffect, "generation default"},
    {"repetition_penalty", "*", KeyUse::kNoEffect, "generation default"},
    {"length_penalty", "*", KeyUse::kNoEffect, "generation default"},
    {"no_repeat_ngram_size", "*", KeyUse::kNoEffect, "generation default"},
    {"bad_words_ids", "*", KeyUse::kNoEffect, "generation default"},
    // Sliding windows.
    {"sliding_window",
     "MistralForCausalLM MixtralForCausalLM Phi3ForCausalLM Gemma2ForCausalLM Gemma3ForCausalLM",
     KeyUse::kRead,
     "window size (Gemma 2: even layers; Gemma 3: local layers; the others: every layer)"},
    {"sliding_window", "LlamaForCausalLM", KeyUse::kNoEffect,
     "transformers' Llama has no window and never reads it"},
    {"sliding_window", "Qwen2ForCausalLM Qwen2MoeForCausalLM Qwen3ForCausalLM", KeyUse::kNoEffect,
     "read by transformers only with use_sliding_window, which is refused"},
    {"max_window_layers", "Qwen2ForCausalLM Qwen2MoeForCausalLM Qwen3ForCausalLM",
     KeyUse::kNoEffect, "read by transformers only with use_sliding_window, which is refused"},
    {"use_sliding_window", "Qwen2ForCausalLM Qwen2MoeForCausalLM Qwen3ForCausalLM", KeyUse::kRead,
     "must be false (windowed Qwen2 layers are refused)"},
    // Mixtures of experts.
    {"num_local_experts", "MixtralForCausalLM", KeyUse::kRead, "experts per layer"},
    {"num_experts", "Qwen2MoeForCausalLM", KeyUse::kRead, "experts per layer"},
    {"num_experts_per_tok", "MixtralForCausalLM Qwen2MoeForCausalLM", KeyUse::kRead,
     "experts each token is routed to"},
    {"moe_intermediate_size", "Qwen2MoeForCausalLM", KeyUse::kRead, "routed expert width"},
    {"shared_expert_intermediate_size", "Qwen2MoeForCausalLM", KeyUse::kRead,
     "shared expert width"},
    {"norm_topk_prob", "Qwen2MoeForCausalLM", KeyUse::kRead, "renormalise the top-k weights"},
    {"decoder_sparse_step", "Qwen2MoeForCausalLM", KeyUse::kRead,
     "must be 1 (dense layers between MoE layers are refused)"},
    {"mlp_only_layers", "Qwen2MoeForCausalLM", KeyUse::kRead,
     "must be empty (dense layers between MoE layers are refused)"},
    {"output_router_logits", "MixtralForCausalLM Qwen2MoeForCausalLM", KeyUse::kNoEffect,
     "auxiliary training loss"},
    {"router_aux_loss_coef", "MixtralForCausalLM Qwen2MoeForCausalLM", KeyUse::kNoEffect,
     "auxiliary training loss"},
    {"router_jitter_noise", "MixtralForCausalLM", KeyUse::kNoEffect, "router noise: training only"},
    // Phi-3.
    {"original_max_position_embeddings", "Phi3ForCausalLM", KeyUse::kRead,
     "LongRoPE: the context that chooses the short or long factors"},
    {"embd_pdrop", "Phi3ForCausalLM", KeyUse::kNoEffect, "dropout: training only"},
    {"resid_pdrop", "Phi3ForCausalLM", KeyUse::kNoEffect, "dropout: training only"},
    // Gemma 2.
    {"query_pre_attn_scalar", "Gemma2ForCausalLM Gemma3ForCausalLM", KeyUse::kRead,
     "attention scale 1/sqrt(it)"},
    {"attn_logit_softcapping", "Gemma2ForCausalLM Gemma3ForCausalLM", KeyUse::kRead,
     "attention score soft-cap"},
    {"final_logit_softcapping", "Gemma2ForCausalLM Gemma3ForCausalLM", KeyUse::kRead,
     "output logit soft-cap"},
    {"hidden_activation", "Gemma2ForCausalLM Gemma3ForCausalLM", KeyUse::kRead,
     "must be gelu_pytorch_tanh (refused otherwise)"},
    {"layer_types", "Gemma2ForCausalLM Gemma3ForCausalLM", KeyUse::kRead,
     "must follow the period (Gemma 2: windowed even layers; Gemma 3: sliding_window_pattern)"},
    // Gemma 3.
    {"rope_local_base_freq", "Gemma3ForCausalLM", KeyUse::kRead, "local layers' rope base"},
    {"sliding_window_pattern", "Gemma3ForCausalLM", KeyUse::kRead,
     "period of local layers (the last of each period is global)"},
    {"hidden_act", "Gemma2ForCausalLM Gemma3ForCausalLM", KeyUse::kNoEffect,
     "transformers' Gemma 2 computes with hidden_activation"},
    {"cache_implementation", "Gemma2ForCausalLM Gemma3ForCausalLM", KeyUse::kNoEffect,
     "which KV cache class transformers allocates"},
    {"sliding_window_size", "Gemma2ForCausalLM", KeyUse::kNoEffect,
     "an alias some uploads carry; transformers' Gemma 2 reads sliding_window"},
};

}  // namespace

std::span<const HfConfigKey> known_hf_config_keys() {
  return kHfConfigKeys;
}

const HfConfigKey* find_hf_config_key(std::string_view hf_class, std::string_view key) {
  for (const HfConfigKey& k : kHfConfigKeys) {
    if (k.key == key && architecture_listed(k.classes, hf_class)) return &k;
  }
  return nullptr;
}

void check_hf_config_keys(const nlohmann::json& config, std::string_view hf_class,
                          const std::string& name) {
  for (const auto& [key, value] : config.items()) {
    if (find_hf_config_key(hf_class, key) != nullptr) continue;
    fail(ErrorCode::kUnsupported,
         "'{}': config.json key '{}' is not known to rapide's {} and could change the results "
         "(refusing rather than guessing; docs/architectures.md lists the keys rapide reads)",
         name, key, hf_class);
  }
}

}  // namespace rapide
