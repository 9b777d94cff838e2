// The shape of a random-weight model that `rapide synth` writes, for each architecture it can
// write (llama, qwen3, gemma3, deepseek2): the hyper-parameters of the decoder, the ones only
// some architectures have (an explicit head size, a sliding window, multi-head latent attention,
// experts), and the K/V values one position adds to the cache.
// "synth100m" names, per architecture, a model whose weights read per decoded token are close
// to synth100m's (the 100 M-parameter Llama the benchmarks use): see default_synth_shape.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "formats/llama_shape.h"

namespace rapide {

enum class SynthArch { kLlama, kQwen3, kGemma3, kDeepseek2 };

// "llama", "qwen3", "gemma3", "deepseek2" (GGUF general.architecture); nullopt otherwise.
std::optional<SynthArch> synth_arch_from_name(std::string_view name);
const char* synth_arch_name(SynthArch arch);

struct SynthShape {
  SynthArch arch = SynthArch::kLlama;
  // dim, layers, heads, kv_heads, ffn (the dense FFN's width), ctx, vocab, rms_eps, rope_base.
  // deepseek2: kv_heads equals heads (MLA has no grouped heads).
  LlamaShape base;
  int head_dim = 0;  // qwen3, gemma3: key_length = value_length (0: dim / heads)

  // gemma3: the local layers' window (attention.sliding_window) and the global layers' linear
  // rope scaling factor (rope.scaling.factor; 1: no rope.scaling keys, as the 1B).
  int window = 0;
  int rope_scale = 1;

  // deepseek2: multi-head latent attention, each head nope_dim + rope_dim key values and
  // v_dim value values; the first dense_layers layers have a dense FFN of width base.ffn,
  // the others `experts` routed experts (experts_used per token) of width expert_ffn plus
  // shared_experts always-on experts of that width.
  int q_lora_rank = 0;
  int kv_lora_rank = 0;
  int nope_dim = 0;
  int rope_dim = 0;
  int v_dim = 0;
  int experts = 0;
  int experts_used = 0;
  int expert_ffn = 0;
  int shared_experts = 0;
  int dense_layers = 0;

  int key_dim() const;    // per head: key_length
  int value_dim() const;  // per head: value_length
  // K/V values one position adds to the cache, over all layers: K and V per KV head, or for
  // MLA the latent row (kv_lora_rank + rope_dim) the cache holds.
  int64_t kv_values_per_position() const;
  // deepseek2: what the same attention would cache with K and V expanded per head
  // (heads * (key_dim + value_dim) per layer); other architectures: kv_values_per_position.
  int64_t expanded_kv_values_per_position() const;
};

// synth100m for `arch`: dim 768, 12 layers, 12 heads of 64 and a 32000-token vocabulary
// (set from the vocabulary file), then
//   llama:     4 KV heads, FFN 2048, ctx 2048, rms eps 1e-5, rope base 1e4 (synth100m itself);
//   qwen3:     the same matrices plus q/k norms, rms eps 1e-6, rope base 1e6;
//   gemma3:    as qwen3, window 512, no rope scaling (the output head is token_embd: the same
//              bytes per token as llama's output.weight);
//   deepseek2: q_lora 256, kv_lora 256, heads of 128 + 64 key and 128 value values, 1 dense
//              layer of FFN 2048 then 8 experts (2 used) of width 512 and 1 shared expert,
//              ctx 4096, rms eps 1e-6, rope base 1e4.
SynthShape default_synth_shape(SynthArch arch);

// "synth100m" (default_synth_shape), or key=value items separated by commas that replace its
// values: dim, layers, heads, ffn, ctx for every architecture; kv_heads for all but deepseek2
// (whose KV heads are its heads); head_dim for qwen3
// and gemma3; window and rope_scale for gemma3; q_lora, kv_lora, nope, rope, v_dim, experts,
// experts_used, expert_ffn, shared_experts, dense_layers for deepseek2. Values are positive
// integers (shared_experts and dense_layers may be 0). Throws kInvalidArgument, naming
// `option`, for an unknown key or bad value and for a shape the architecture cannot have
// (head sizes odd or not dividing dim, kv_heads not dividing heads, experts_used > experts,
// dense_layers > layers, ...).
SynthShape parse_synth_shape(SynthArch arch, const std::string& text, const std::string& option);

}  // namespace rapide
